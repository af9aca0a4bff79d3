export { loadConfig } from './config';
export type { RegistryDatabase } from './db';
export { startRegistry } from './service';
