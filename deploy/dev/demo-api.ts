import type { Server } from 'node:http';
import { verifyPaygateRequest } from '@paygate/gateway-middleware';
import express from 'express';

/**
 * The demo seller's API behind Paygate: a paid weather forecast (an API skill in PROXY mode) and an order
 * endpoint (a Product skill). Paygate forwards paid calls here; it never sees a payment itself, and answers
 * only requests Paygate signed (verifyPaygateRequest: a call straight to this port is refused 401).
 */
export async function startDemoApi(
  port: number,
  secretKey: string,
  paygateUrl?: string,
): Promise<{ url: string; stop(): Promise<void> }> {
  const app = express();
  app.use(verifyPaygateRequest({ secretKey, paygateUrl }));
  app.use(express.json());
  app.get('/forecast', (req, res) => {
    const city = typeof req.query.city === 'string' ? req.query.city.slice(0, 60) : 'Lisbon';
    // The payment this call was bought with: Paygate's X-Paygate-Tx-Hash, covered by its signature.
    res.json({ city, forecast: 'sunny', highC: 24, lowC: 15, paidWith: req.paygate?.txHash ?? null });
  });
  app.post('/orders', (req, res) => {
    res.status(201).json({
      orderId: `ord_${Date.now()}`,
      item: req.body?.item ?? 'demo item',
      status: 'accepted',
      paidWith: req.paygate?.txHash ?? null,
    });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
