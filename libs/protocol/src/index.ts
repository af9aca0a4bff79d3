export * from './mcp';
export * from './payment';
export * from './refunds';
export * from './request-signature';
export * from './sign-in-with-x';
export * from './x402';
