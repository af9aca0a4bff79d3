import type { LocalChain } from '../scripts/start-local-chain';

export interface DemoBootstrap {
  /** Paths the edge sends to the demo seller instead of a Paygate service. */
  edgePrefixes: Record<string, string>;
  nextSteps: string;
  stop(): Promise<void>;
}

/**
 * Signs up a demo seller, registers its skills and starts its page. Filled in once the registry, the
 * checkout widget and the demo seller exist; until then it only prints the catalog as the next step.
 */
export async function bootstrapDemo(options: {
  publicBaseUrl: string;
  chain: LocalChain;
  operatorToken: string;
  log: (line: string) => void;
}): Promise<DemoBootstrap> {
  return {
    edgePrefixes: {},
    nextSteps: `Next step: curl ${options.publicBaseUrl}/api/v1/skills`,
    stop: async () => undefined,
  };
}
