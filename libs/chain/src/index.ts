export { addressOfPrivateKey, addressToTopic, formatAddress, sameAddress, topicToAddress } from './address';
export { getTransferLogs, isRangeTooLargeError, type LogsProvider } from './logs';
export {
  isNetworkName,
  type NetworkName,
  networkByChainId,
  networkByName,
  networks,
  resolveUsdcAddress,
} from './networks';
export {
  broadcastSignedTransaction,
  checkChainRpc,
  fetchChainId,
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
  usdcAbi,
  usdcEip712Domain,
} from './usdc';
