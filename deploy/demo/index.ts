export { type DemoPageConfig, renderDemoPage } from './page';
export { type DemoSeller, type DemoSellerOptions, type ReceivedWebhook, startDemoSeller } from './server';
