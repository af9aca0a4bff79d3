/** The notifier's live channel (`/api/v1/ws`): it says when something of this seller changed. */

export type LiveStatus = 'connecting' | 'live' | 'offline';

interface LiveOptions {
  /** The same token the REST calls carry (never put in the URL). */
  token: string;
  /** Something of this seller changed (eventType says what): called at most once per burst. */
  onChange: (eventTypes: string[]) => void;
  onStatus: (status: LiveStatus) => void;
  url?: string;
  WebSocketImpl?: typeof WebSocket;
  /** Changes arriving within this window are one refresh. */
  debounceMs?: number;
}

/** Reconnect delays: doubled from the first up to the last, so an outage costs the server little. */
const RECONNECT_FIRST_MS = 1000;
const RECONNECT_MAX_MS = 30_000;
/** Close codes the notifier uses for a refused token: reconnecting would not help (REST signs the user out). */
const CLOSE_UNAUTHORIZED = 4401;

export function liveUrl(location: Pick<Location, 'protocol' | 'host'>): string {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/api/v1/ws`;
}

/** Changes arriving within debounceMs are one onChange call (in arrival order); `cancel` drops a pending one. */
function changeBatcher(onChange: (eventTypes: string[]) => void, debounceMs: number) {
  let pending: string[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  return {
    add(eventType: string) {
      pending.push(eventType);
      timer ??= setTimeout(() => {
        timer = undefined;
        onChange(pending);
        pending = [];
      }, debounceMs);
    },
    cancel: () => clearTimeout(timer),
  };
}

export function openLiveChannel(options: LiveOptions): { close: () => void } {
  const Impl = options.WebSocketImpl ?? WebSocket;
  const url = options.url ?? liveUrl(window.location);
  const debounceMs = options.debounceMs ?? 250;
  let socket: WebSocket | undefined;
  let closed = false;
  let delayMs = RECONNECT_FIRST_MS;
  let reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  const changes = changeBatcher(options.onChange, debounceMs);

  const connect = () => {
    if (closed) return;
    options.onStatus('connecting');
    let current: WebSocket;
    try {
      current = new Impl(url);
    } catch {
      scheduleReconnect();
      return;
    }
    socket = current;
    current.onopen = () => current.send(JSON.stringify({ type: 'authenticate', token: options.token }));
    current.onmessage = (message) => {
      let parsed: { type?: string; eventType?: string };
      try {
        parsed = JSON.parse(String(message.data));
      } catch {
        return; // not JSON: ignored
      }
      if (parsed?.type === 'authenticated') {
        delayMs = RECONNECT_FIRST_MS;
        options.onStatus('live');
        // What changed while the channel was down is read now.
        options.onChange(['reconnected']);
      } else if (parsed?.type === 'seller_event' && parsed.eventType) {
        changes.add(parsed.eventType);
      }
    };
    current.onclose = (event) => {
      if (socket !== current) return;
      socket = undefined;
      options.onStatus('offline');
      if (event.code !== CLOSE_UNAUTHORIZED) scheduleReconnect();
    };
  };

  const scheduleReconnect = () => {
    if (closed || reconnectTimer) return;
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined;
      connect();
    }, delayMs);
    delayMs = Math.min(delayMs * 2, RECONNECT_MAX_MS);
  };

  connect();
  return {
    close() {
      closed = true;
      if (reconnectTimer) clearTimeout(reconnectTimer);
      changes.cancel();
      const open = socket;
      socket = undefined;
      open?.close(1000, 'signed out');
    },
  };
}
