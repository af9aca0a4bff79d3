/**
 * The images, checked without a Docker engine: the Dockerfile parsed with dockerfile-ast, every COPY source
 * present in the build context (after .dockerignore, matched the way Docker matches it), every file the images
 * run produced by the build stage's compile step, a runtime stage with plain node, production dependencies, no
 * tsx/esbuild/TypeScript and a non-root user; docker-compose.yml and k8s/ run those images and files. Then the
 * compile step itself runs here and its output starts: a compiled service reaches its production config check
 * and another serves /readyz on real Postgres and NATS.
 *
 *   npx jest deploy/test/dockerfile
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import dockerignore from '@balena/dockerignore';
import { createTestEnvironment, testWallets, waitFor } from '@paygate/testing';
import { type Copy, DockerfileParser, type Instruction } from 'dockerfile-ast';
import { parse, parseAllDocuments } from 'yaml';
import routeTable from '../routes.json';
import { buildDist, DIST_ENTRIES } from '../scripts/build-dist';

const ROOT = path.join(__dirname, '../..');
const SERVICES = Object.keys(routeTable.services);
const DOCKERFILE = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
const DIST_OUTPUTS = DIST_ENTRIES.map((e) => e.output);

interface Stage {
  name: string;
  /** A previous stage's name, or an external image. */
  from: string;
  instructions: Instruction[];
}

function parseStages(text: string): Stage[] {
  const dockerfile = DockerfileParser.parse(text);
  const stages: Stage[] = [];
  for (const instruction of dockerfile.getInstructions()) {
    const keyword = instruction.getKeyword();
    if (keyword === 'FROM') {
      const from = instruction as unknown as { getImage(): string | null; getBuildStage(): string | null };
      stages.push({
        name: from.getBuildStage() ?? `#${stages.length}`,
        from: from.getImage() ?? '',
        instructions: [],
      });
    } else if (stages.length > 0) {
      stages.at(-1)!.instructions.push(instruction);
    }
  }
  return stages;
}

/** The arguments of an instruction without its --flags (JSON form or shell form). */
function argumentsOf(instruction: Instruction): string[] {
  return instruction
    .getArguments()
    .map((a) => a.getValue())
    .filter((v) => !v.startsWith('--'));
}

function flag(instruction: Instruction, name: string): string | undefined {
  const flags = (
    instruction as unknown as { getFlags?(): Array<{ getName(): string; getValue(): string | null }> }
  ).getFlags?.();
  return flags?.find((f) => f.getName() === name)?.getValue() ?? undefined;
}

/** A stage and every stage it is built FROM, nearest first. */
function lineage(stages: Stage[], name: string): Stage[] {
  const out: Stage[] = [];
  let current = stages.find((s) => s.name === name);
  while (current) {
    out.push(current);
    current = stages.find((s) => s.name === current!.from);
  }
  return out;
}

const text = (instruction: Instruction) => instruction.getTextContent();

/** Everything the Dockerfile gets wrong: one line each, empty when it is right. */
export function dockerfileProblems(dockerfileText: string): string[] {
  const problems: string[] = [];
  const stages = parseStages(dockerfileText);
  const names = stages.map((s) => s.name);
  const ignore = dockerignore({ ignorecase: false }).add(
    readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#')),
  );
  // COPY/ADD: sources from the build context exist and are sent; --from names an earlier stage.
  stages.forEach((stage, index) => {
    for (const instruction of stage.instructions) {
      const keyword = instruction.getKeyword();
      if (keyword !== 'COPY' && keyword !== 'ADD') continue;
      const fromStage = flag(instruction, 'from') ?? (instruction as Copy).getFromFlag?.()?.getValue();
      const sources = argumentsOf(instruction).slice(0, -1);
      if (fromStage) {
        if (!names.slice(0, index).includes(fromStage))
          problems.push(`${stage.name}: ${keyword} --from=${fromStage}: no earlier stage of that name`);
        continue;
      }
      for (const source of sources) {
        if (source === '.') continue;
        if (/[*?[]/.test(source)) {
          problems.push(`${stage.name}: ${keyword} ${source}: wildcards are not checked; name the files`);
        } else if (!existsSync(path.join(ROOT, source))) {
          problems.push(`${stage.name}: ${keyword} ${source}: COPY source does not exist in the repository`);
        } else if (ignore.ignores(source)) {
          problems.push(
            `${stage.name}: ${keyword} ${source}: excluded from the build context by .dockerignore`,
          );
        }
      }
    }
  });
  const missing = ['build', 'prune', 'chain', 'runtime'].filter((target) => !names.includes(target));
  if (missing.length > 0) return [...problems, ...missing.map((target) => `stage ${target} is missing`)];

  // The build stage compiles: deploy/scripts/build-dist.ts produces what the images run.
  const buildRuns = stages
    .find((s) => s.name === 'build')!
    .instructions.filter((i) => i.getKeyword() === 'RUN');
  if (!buildRuns.some((i) => text(i).includes('deploy/scripts/build-dist.ts')))
    problems.push('build: no RUN of deploy/scripts/build-dist.ts (the compile step)');
  const prune = stages.find((s) => s.name === 'prune')!;
  const pruneRun = prune.instructions.map(text).join('\n');
  if (!/pnpm install[^\n]*--prod/.test(pruneRun.replace(/\\\n/g, ' ')))
    problems.push('prune: no `pnpm install --prod` (production dependencies only)');
  for (const kept of ['services/*/dist', 'deploy/dist'])
    if (!pruneRun.includes(kept)) problems.push(`prune: does not keep ${kept} (the compiled files)`);

  // What the images run: the runtime CMD for every SERVICE, the chain CMD.
  const runtime = lineage(stages, 'runtime');
  const chain = lineage(stages, 'chain');
  const cmdOf = (lin: Stage[]) =>
    lin
      .flatMap((s) => s.instructions)
      .filter((i) => i.getKeyword() === 'CMD')
      .map(text)
      .at(0) ?? '';
  const runtimeCmd = cmdOf(runtime);
  // The image's SERVICE variable, as the shell in CMD expands it.
  const serviceMain = `services/\${SERVICE}/dist/main.js`;
  if (!runtimeCmd.includes(serviceMain)) problems.push(`runtime: CMD does not run ${serviceMain}`);
  for (const service of SERVICES) {
    const file = `services/${service}/dist/main.js`;
    if (!DIST_OUTPUTS.includes(file)) problems.push(`runtime: ${file} is not produced by build-dist`);
  }
  for (const file of cmdOf(chain).match(/[\w./-]+\.js/g) ?? [])
    if (!DIST_OUTPUTS.includes(file))
      problems.push(`chain: CMD runs ${file}, which build-dist does not produce`);

  // The runtime stage and everything under it: plain node, no build tools, production, non-root.
  const base = runtime.at(-1)!;
  // FROM ${NODE_IMAGE}: the ARG's default.
  const image = base.from.replace(
    /\$\{(\w+)\}/g,
    (_m, name: string) => dockerfileText.match(new RegExp(`^ARG ${name}=(\\S+)`, 'm'))?.[1] ?? '',
  );
  if (stages.some((s) => s.name === base.from) || !/^node:\d+/.test(image))
    problems.push(`runtime: must start from a plain node image, not ${base.from} (${image})`);
  for (const stage of runtime) {
    for (const instruction of stage.instructions) {
      const body = text(instruction);
      if (/\btsx\b|esbuild|\btsc\b|\bpnpm\s|corepack/.test(body))
        problems.push(`${stage.name}: ${instruction.getKeyword()} uses a build tool: ${body.split('\n')[0]}`);
      if (
        instruction.getKeyword() === 'COPY' &&
        flag(instruction, 'from') &&
        flag(instruction, 'from') !== 'prune'
      )
        problems.push(
          `${stage.name}: copies from ${flag(instruction, 'from')}, not from the pruned production set`,
        );
    }
  }
  const env = runtime
    .flatMap((s) => s.instructions)
    .filter((i) => i.getKeyword() === 'ENV')
    .map(text)
    .join(' ');
  if (!/NODE_ENV=production/.test(env)) problems.push('runtime: NODE_ENV=production is not set');
  const user = runtime
    .flatMap((s) => s.instructions)
    .filter((i) => i.getKeyword() === 'USER')
    .map((i) => argumentsOf(i)[0] ?? '')
    .at(0);
  if (!user) problems.push('runtime: no USER (it would run as root)');
  else if (/^(root|0)(:|$)/.test(user)) problems.push(`runtime: USER ${user} is root`);
  return problems;
}

describe('Dockerfile (static)', () => {
  it('has every COPY source, compiles what it runs, and runs it as non-root node with production dependencies', () => {
    expect(dockerfileProblems(DOCKERFILE)).toEqual([]);
  });

  it('catches a missing COPY source, a tsx runtime and a root user', () => {
    const broken = DOCKERFILE.replace(
      'COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./',
      'COPY pnpm-lock.yaml pnpm-workspace.yaml package.json .npmrc ./',
    )
      .replace('USER 10001:10001', 'USER root')
      .replace('exec node --enable-source-maps', 'exec node_modules/.bin/tsx');
    expect(dockerfileProblems(broken)).toEqual(
      expect.arrayContaining([
        'deps: COPY .npmrc: COPY source does not exist in the repository',
        'runtime: USER root is root',
        expect.stringMatching(/^runtime: CMD uses a build tool/),
      ]),
    );
  });
});

describe('docker-compose.yml and k8s run those images and files', () => {
  const stages = parseStages(DOCKERFILE).map((s) => s.name);

  it('compose builds existing targets and runs compiled files, never tsx', () => {
    const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true });
    for (const [name, svc] of Object.entries(compose.services as Record<string, any>)) {
      if (svc.build) {
        expect({ name, target: stages.includes(svc.build.target) }).toEqual({ name, target: true });
        expect(svc.build.dockerfile).toBe('Dockerfile');
      }
      const command = (svc.command ?? []) as string[];
      if (!svc.build) continue;
      expect({ name, command: command.join(' ') }).not.toEqual({
        name,
        command: expect.stringMatching(/tsx/),
      });
      for (const file of command.filter((c) => c.endsWith('.js')))
        expect({ name, file, built: DIST_OUTPUTS.includes(file) }).toEqual({ name, file, built: true });
      if (SERVICES.includes(name)) expect(svc.environment.SERVICE).toBe(name);
    }
  });

  it('every k8s Deployment runs the paygate image with a SERVICE the image has compiled', () => {
    const dir = path.join(ROOT, 'k8s/base');
    const objects = readdirSync(dir)
      .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
      .flatMap((f) => parseAllDocuments(readFileSync(path.join(dir, f), 'utf8')).map((d) => d.toJS()))
      .filter(Boolean);
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([...SERVICES].sort());
    for (const deployment of deployments) {
      const container = deployment.spec.template.spec.containers[0];
      expect(container.image).toBe('paygate');
      // The image's own CMD runs the service; an override would bypass it.
      expect(container.command).toBeUndefined();
      const config = objects.find(
        (o) => o.kind === 'ConfigMap' && o.metadata.name === `${deployment.metadata.name}-config`,
      );
      expect(DIST_OUTPUTS).toContain(`services/${config.data.SERVICE}/dist/main.js`);
      expect(deployment.spec.template.spec.securityContext.runAsUser).toBe(10001);
    }
    const overlay = parse(
      readFileSync(path.join(ROOT, 'k8s/overlays/production/kustomization.yaml'), 'utf8'),
    );
    expect(overlay.images.map((i: { name: string }) => i.name)).toEqual(['paygate']);
  });
});

describe('the compile step (deploy/scripts/build-dist.ts) and its output', () => {
  const NODE_PATH = path.join(ROOT, 'node_modules/.pnpm/node_modules');

  beforeAll(async () => {
    await buildDist();
  }, 120_000);

  function runCompiled(file: string, env: NodeJS.ProcessEnv) {
    // From outside the repository, as in the image: only NODE_PATH finds the packages.
    const child = spawn(process.execPath, ['--enable-source-maps', path.join(ROOT, file)], {
      cwd: '/tmp',
      env: { PATH: process.env.PATH, NODE_PATH, ...env },
    });
    let output = '';
    child.stdout.on('data', (c) => {
      output += c;
    });
    child.stderr.on('data', (c) => {
      output += c;
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    return { child, output: () => output, exited };
  }

  it('produces every output, none of which loads tsx, esbuild or TypeScript at run time', () => {
    for (const output of DIST_OUTPUTS) {
      const code = readFileSync(path.join(ROOT, output), 'utf8');
      expect({ output, buildTools: code.match(/require\("(tsx|esbuild|typescript)[/"]/g) }).toEqual({
        output,
        buildTools: null,
      });
    }
    // The checkout widget is embedded, built already.
    expect(readFileSync(path.join(ROOT, 'services/checkout/dist/main.js'), 'utf8')).toContain(
      'PaygateCheckout',
    );
  });

  it('a compiled service reaches its production config check and refuses, naming the rule', async () => {
    const indexer = runCompiled('services/chain-indexer/dist/main.js', {
      NODE_ENV: 'production',
      CHAIN_NETWORK: 'base',
      CHAIN_RPC_URL: 'https://mainnet.base.org',
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '3',
    });
    expect(await indexer.exited).toBe(1);
    expect(indexer.output()).toContain(
      'invalid production configuration of chain-indexer: CHAIN_RPC_URL: mainnet.base.org is a public rate-limited endpoint',
    );
  }, 30_000);

  it('a compiled service starts on Postgres and NATS, is ready and serves its prebuilt browser bundle', async () => {
    const env = await createTestEnvironment('dist');
    const registry = runCompiled('services/registry/dist/main.js', {
      ...env.envFor('registry'),
      LOG_LEVEL: 'info',
      STARTUP_ATTEMPTS: '5',
    });
    try {
      const url = await waitFor(() => registry.output().match(/listening on (http:\/\/[\d.:]+)/)?.[1], {
        timeoutMs: 30_000,
        message: `compiled registry listening (output: ${registry.output().slice(-500)})`,
      });
      expect((await fetch(`${url}/readyz`)).status).toBe(200);
      // The seller dashboard, bundled for the browser at build time (the image has no esbuild).
      const dashboard = await fetch(`${url}/dashboard/assets/app.js`);
      expect(dashboard.status).toBe(200);
      expect((await dashboard.text()).length).toBeGreaterThan(1000);
    } finally {
      registry.child.kill('SIGTERM');
      await registry.exited;
      await env.cleanup();
    }
  }, 60_000);
});
