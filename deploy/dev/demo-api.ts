import type { Server } from 'node:http';
import express from 'express';

/**
 * The demo seller's API behind Paygate: a paid weather forecast (an API skill in PROXY mode) and an order
 * endpoint (a Product skill). Paygate forwards paid calls here; it never sees a payment itself.
 */
export async function startDemoApi(port: number): Promise<{ url: string; stop(): Promise<void> }> {
  const app = express();
  app.use(express.json());
  app.get('/forecast', (req, res) => {
    const city = typeof req.query.city === 'string' ? req.query.city.slice(0, 60) : 'Lisbon';
    res.json({ city, forecast: 'sunny', highC: 24, lowC: 15, paidWith: req.header('x-402-receipt') ?? null });
  });
  app.post('/orders', (req, res) => {
    res
      .status(201)
      .json({ orderId: `ord_${Date.now()}`, item: req.body?.item ?? 'demo item', status: 'accepted' });
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(port, '127.0.0.1', () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
