import type { Bus } from '@paygate/bus';
import { CONSUMERS, type ServiceName } from '@paygate/contracts';
import type { NextFunction, Request, Response } from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry };

export interface ServiceMetrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  eventsHandled: Counter<'consumer' | 'outcome'>;
  outboxBacklog: Gauge;
  /** 1 when the last /readyz (the kubelet's readiness probe) passed every check, 0 when one failed. */
  ready: Gauge;
}

/** One prom-client registry per service instance (tests run several in one process). */
export function createMetrics(service: string): ServiceMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request duration by route',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    eventsHandled: new Counter({
      name: 'events_handled_total',
      help: 'Events handled by consumer and outcome',
      labelNames: ['consumer', 'outcome'],
      registers: [registry],
    }),
    outboxBacklog: new Gauge({
      name: 'outbox_backlog',
      help: 'Outbox rows not yet published',
      registers: [registry],
    }),
    ready: new Gauge({
      name: 'service_ready',
      help: "1 when the last readiness check (/readyz) passed every check (Postgres, NATS, the service's own), 0 when one failed",
      registers: [registry],
    }),
  };
}

export function httpMetricsMiddleware(metrics: ServiceMetrics) {
  return (req: Request, res: Response, next: NextFunction) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      // The matched route pattern keeps label cardinality bounded (never the raw path).
      const route = req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      end({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  };
}

/** The declared consumers' backlog and dead letters, read from JetStream at each scrape; -1: unreadable. */
export function registerBusMetrics(registry: Registry, bus: Bus, service: ServiceName): void {
  const durables = Object.keys(CONSUMERS[service]);
  if (durables.length === 0) return;
  const registers = [registry];
  new Gauge({
    name: 'bus_consumer_pending_messages',
    help: "Events on the consumer's subject not yet acknowledged (pending delivery + awaiting ack); -1: unreadable",
    labelNames: ['consumer'],
    registers,
    async collect() {
      await Promise.all(
        durables.map(async (durable) => {
          const info = await bus.jsm.consumers.info(bus.eventsStream, durable).catch(() => undefined);
          this.set({ consumer: durable }, info ? info.num_pending + info.num_ack_pending : -1);
        }),
      );
    },
  });
  new Gauge({
    name: 'bus_dead_letter_messages',
    help: "Events parked on the consumer's dead-letter subject (replay or discard them); -1: unreadable",
    labelNames: ['consumer'],
    registers,
    async collect() {
      const subjects = await bus.jsm.streams
        .info(bus.deadLetterStream, { subjects_filter: `dlq.${bus.namespace}.>` })
        .then((info) => info.state.subjects ?? {})
        .catch(() => undefined);
      for (const durable of durables) {
        this.set({ consumer: durable }, subjects ? (subjects[bus.deadLetterSubject(durable)] ?? 0) : -1);
      }
    },
  });
}
