/**
 * Calls a paid skill as an MCP tool: `pnpm exec tsx deploy/dev/pay-mcp.ts [tool name] [JSON arguments]`.
 * Connects an MCP SDK client to the gateway's MCP endpoint (http://localhost:8080/api/v1/mcp, or PAYGATE_URL),
 * lists the tools, and calls the one named (the first demo-weather tool when none is) through the agent client's
 * MCP mode: the unpaid call answers x402's payment requirements, the buyer test wallet signs an EIP-3009
 * authorization (anvil's public dev key: never use it elsewhere; at most 0.10 USDC a call), and the paid call
 * answers the seller's result with the settlement in `_meta["x402/payment-response"]`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgent } from '@paygate/agent-client';
import { testWallets } from '@paygate/testing';
import { JsonRpcProvider, Wallet } from 'ethers';

async function main(): Promise<void> {
  const base = process.env.PAYGATE_URL ?? 'http://localhost:8080';
  const client = new Client({ name: 'paygate-dev-agent', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/api/v1/mcp`)));
  try {
    const { tools } = await client.listTools();
    console.log(`${tools.length} paid tools:`);
    for (const tool of tools) console.log(`  ${tool.name}: ${tool.description?.split('\n')[0]}`);
    const name = process.argv[2] ?? tools.find((t) => t.name.startsWith('demo-weather__'))?.name;
    if (!name) throw new Error('usage: tsx deploy/dev/pay-mcp.ts <tool name> [JSON arguments]');
    const args = process.argv[3] ? (JSON.parse(process.argv[3]) as Record<string, unknown>) : {};
    const rpcUrl = process.env.CHAIN_RPC_URL ?? 'http://127.0.0.1:8545';
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, new JsonRpcProvider(rpcUrl)),
      maxPricePerCall: '0.10',
    });
    const started = performance.now();
    const result = await agent.callTool(client, { name, arguments: args });
    console.log(`\n${name} answered in ${Math.round(performance.now() - started)} ms:`);
    console.log(JSON.stringify(result, null, 2));
  } finally {
    await client.close();
  }
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
