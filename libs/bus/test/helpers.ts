export { migrateToLatest } from '@paygate/runtime';
export { openSchema as openSchemaForTest } from '@paygate/testing';
