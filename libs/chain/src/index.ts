export {
  addressOfPrivateKey,
  addressToTopic,
  formatAddress,
  isValidAddress,
  sameAddress,
  shortAddress,
  topicToAddress,
} from './address';
export {
  type GetTransferLogsOptions,
  getTransferLogs,
  isRangeTooLargeError,
  type LogsProvider,
} from './logs';
export {
  type ChainNetwork,
  DEFAULT_NETWORK_NAME,
  isNetworkName,
  NETWORK_NAMES,
  type NetworkName,
  networkByChainId,
  networkByName,
  networkFromEnv,
  networks,
  resolveUsdcAddress,
} from './networks';
export {
  broadcastSignedTransaction,
  checkChainRpc,
  fetchChainId,
  type MakeProviderOptions,
  makeProvider,
  rpcUrlForLogs,
} from './provider';
export { eip681TransferUri } from './uri';
export {
  compareTransferLogs,
  decodeTransferLog,
  type LogLike,
  PERMIT_TYPES,
  TRANSFER_TOPIC,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type TransferLog,
  USDC_DECIMALS,
  type UsdcEip712Domain,
  usdcAbi,
  usdcEip712Domain,
} from './usdc';
