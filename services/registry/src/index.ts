export * from './config';
export type { RegistryDatabase } from './db';
export { WEBHOOK_SECRET_RPC, type WebhookSecretReply } from './rpc';
export * from './service';
