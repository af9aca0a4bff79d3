import type { Bus } from '@paygate/bus';
import { createTestEnvironment, openSchema, type TestEnvironment, waitFor } from '@paygate/testing';
import { loadConfig, type NotifierDatabase, type RunningNotifier, startNotifier } from '../src';
import { publish, sessionSnapshot, WidgetSocket } from './helpers';

jest.setTimeout(45_000);

describe('notifier live session updates over WebSocket', () => {
  let env: TestEnvironment;
  let bus: Bus;
  let replicaA: RunningNotifier;
  let replicaB: RunningNotifier;
  const sockets: WidgetSocket[] = [];
  const open = async (replica: RunningNotifier) => {
    const socket = await WidgetSocket.open(replica.url);
    sockets.push(socket);
    return socket;
  };

  beforeAll(async () => {
    env = await createTestEnvironment('notifws');
    bus = await env.bus();
    // Two replicas of one notifier: same schema, same namespace, each with its own sockets.
    // Short enough for the idle test, long enough that a busy worker still answers each ping before the next tick.
    const settings = { WS_IDLE_TIMEOUT_MS: '2000', WS_HEARTBEAT_INTERVAL_MS: '1000' };
    replicaA = await startNotifier(loadConfig(env.envFor('notifier', settings)));
    replicaB = await startNotifier(loadConfig(env.envFor('notifier', settings)));
  });

  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await replicaA?.stop();
    await replicaB?.stop();
    await env?.cleanup();
  });

  it('sends the current state on subscribe, then every change, on whichever replica the widget reached', async () => {
    const created = sessionSnapshot({ sessionId: 'cs_live_1', updatedAt: '2026-11-22T10:00:00.000Z' });
    await publish(bus, 'checkout.session_created', 'checkout', created);
    const db = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await waitFor(
      async () =>
        (await db
          .selectFrom('sessions')
          .select('status')
          .where('session_id', '=', 'cs_live_1')
          .executeTakeFirst()) !== undefined,
      { message: 'session projected' },
    );
    await db.destroy();

    const widgetOnB = await open(replicaB);
    const widgetOnA = await open(replicaA);
    widgetOnB.send({ type: 'subscribe', sessionId: 'cs_live_1' });
    widgetOnA.send({ type: 'subscribe', sessionId: 'cs_live_1' });
    await waitFor(() => widgetOnB.sessionMessages('cs_live_1').length === 1, {
      message: 'current state on B',
    });
    expect(widgetOnB.messages[0]).toEqual({ type: 'subscribed', sessionId: 'cs_live_1' });
    expect(widgetOnB.messages[1]).toEqual({ type: 'session', session: created });

    const paid = {
      ...created,
      status: 'paid' as const,
      paidAmount: created.exactAmount,
      txHash: `0x${'1'.repeat(64)}`,
      payer: `0x${'2'.repeat(40)}`,
      updatedAt: '2026-11-22T10:01:00.000Z',
    };
    await publish(bus, 'checkout.session_paid', 'checkout', paid);
    await waitFor(() => widgetOnB.sessionMessages('cs_live_1').length === 2, { message: 'change on B' });
    await waitFor(() => widgetOnA.sessionMessages('cs_live_1').length === 2, { message: 'change on A' });
    expect(widgetOnB.sessionMessages('cs_live_1')[1]).toEqual({ type: 'session', session: paid });

    // A late, older snapshot (events of a session may arrive out of order) is not sent.
    await publish(bus, 'checkout.session_reopened', 'checkout', {
      ...created,
      updatedAt: '2026-11-22T10:00:30.000Z',
    });
    const later = { ...paid, status: 'expired' as const, updatedAt: '2026-11-22T10:20:00.000Z' };
    await publish(bus, 'checkout.session_expired', 'checkout', later);
    await waitFor(() => widgetOnB.sessionMessages('cs_live_1').length === 3, {
      message: 'newer change on B',
    });
    expect(widgetOnB.sessionMessages('cs_live_1').map((m) => m.session.status)).toEqual([
      'open',
      'paid',
      'expired',
    ]);
    // The stored projection also kept the newest.
    const check = openSchema<NotifierDatabase>(env.schemaFor('notifier'));
    await waitFor(
      async () =>
        (
          await check
            .selectFrom('sessions')
            .select('status')
            .where('session_id', '=', 'cs_live_1')
            .executeTakeFirst()
        )?.status === 'expired',
      { message: 'projection is newest' },
    );
    await check.destroy();
  });

  it('acknowledges a subscription to a session it has not seen yet and sends its first state when it appears', async () => {
    const widget = await open(replicaA);
    widget.send({ type: 'subscribe', sessionId: 'cs_live_new' });
    await waitFor(() => widget.messages.length === 1);
    expect(widget.messages[0]).toEqual({ type: 'subscribed', sessionId: 'cs_live_new' });
    const created = sessionSnapshot({ sessionId: 'cs_live_new' });
    await publish(bus, 'checkout.session_created', 'checkout', created);
    await waitFor(() => widget.sessionMessages('cs_live_new').length === 1, { message: 'created state' });
    // Unsubscribed sessions are not sent.
    widget.send({ type: 'unsubscribe', sessionId: 'cs_live_new' });
    // A socket's messages are handled in order: once a later subscribe is acknowledged, the unsubscribe was done.
    widget.send({ type: 'subscribe', sessionId: 'cs_live_probe' });
    await waitFor(() =>
      widget.messages.some((m) => m.type === 'subscribed' && m.sessionId === 'cs_live_probe'),
    );
    // Another widget still subscribed to the session: its copy of the change is the signal it went out.
    const watcher = await open(replicaA);
    watcher.send({ type: 'subscribe', sessionId: 'cs_live_new' });
    await waitFor(() => watcher.sessionMessages('cs_live_new').length === 1, {
      message: 'watcher has the state',
    });
    await publish(bus, 'checkout.session_expired', 'checkout', {
      ...created,
      status: 'expired',
      updatedAt: new Date(Date.now() + 1000).toISOString(),
    });
    await waitFor(() => watcher.sessionMessages('cs_live_new').length === 2, {
      message: 'expired state sent',
    });
    expect(widget.sessionMessages('cs_live_new')).toHaveLength(1);
  });

  it('sends a state heard on the bus but not yet stored to a widget that subscribes in between', async () => {
    // As if the core subscription delivered the change before the durable consumer stored it.
    const heard = sessionSnapshot({ sessionId: 'cs_live_gap', updatedAt: '2026-11-22T11:00:00.000Z' });
    replicaA.live.publish(heard);
    const widget = await open(replicaA);
    widget.send({ type: 'subscribe', sessionId: 'cs_live_gap' });
    await waitFor(() => widget.sessionMessages('cs_live_gap').length === 1, { message: 'heard state' });
    expect(widget.sessionMessages('cs_live_gap')[0].session).toEqual(heard);
  });

  it('answers bad messages with typed errors and bounds subscriptions per socket', async () => {
    const widget = await open(replicaB);
    widget.send('not json');
    widget.send({ type: 'shout' });
    widget.send({ type: 'subscribe', sessionId: '../../etc' });
    for (let i = 0; i < 11; i++) widget.send({ type: 'subscribe', sessionId: `cs_many_${i}` });
    await waitFor(() => widget.messages.some((m) => m.code === 'too_many_subscriptions'), {
      message: 'limit',
    });
    const codes = widget.messages.filter((m) => m.type === 'error').map((m) => m.code);
    expect(codes).toEqual([
      'invalid_message',
      'unknown_type',
      'invalid_session_id',
      'too_many_subscriptions',
    ]);
    expect(widget.messages.filter((m) => m.type === 'subscribed')).toHaveLength(10);
    expect(widget.messages.find((m) => m.code === 'too_many_subscriptions').sessionId).toBe('cs_many_10');
  });

  it('closes a socket whose message is larger than the payload limit', async () => {
    const widget = await open(replicaA);
    widget.send({ type: 'subscribe', sessionId: 'x'.repeat(5000) });
    await waitFor(() => widget.closed, { message: 'closed' });
    expect(widget.closed?.code).toBe(1009);
  });

  it('closes idle sockets (no subscription) and answers a plain HTTP GET with 426', async () => {
    const widget = await open(replicaB);
    await waitFor(() => widget.closed, { timeoutMs: 10_000, message: 'idle socket closed' });
    expect(widget.closed?.code).toBe(1000);
    const response = await fetch(`${replicaB.url}/api/v1/ws`);
    expect(response.status).toBe(426);
    expect((await response.json()).error.code).toBe('upgrade_required');
  });
});
