import type { Bus } from '@paygate/bus';
import { CONSUMERS, type ServiceName } from '@paygate/contracts';
import { Gauge, type Registry } from 'prom-client';

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
