/** The shared test fixtures. The property-test helpers (fast-check, slow to load) live at `@paygate/testing/fuzz`. */
export * from './anvil';
export * from './api-contract';
export { CHROMIUM_LAUNCH_OPTIONS } from './chromium';
export { TestClock } from './clock';
export { signTransferAuthorization, submitTransferAuthorization } from './eip3009';
export { eventDataOf, eventOf, publishEvent } from './events';
export * from './harness';
export * from './infra';
export { ephemeralRangeStart, FIXED_PORT_BLOCKS_START, findFreePort, findRestartablePort } from './ports';
export { type ServiceProcess, spawnTsProcess, startServiceProcess } from './processes';
export { createActiveSkill, signUpSeller, siweMessageText } from './registry-client';
export { type RpcCall, rpcError, startRpcProxy } from './rpc-proxy';
export { schemaValidator } from './schema-validator';
export * from './stand-ins';
export {
  dropRetiredSuiteDatabases,
  ensureTemplateDatabase,
  TEMPLATE_DATABASE_ENV,
} from './template-database';
export * from './wallets';
