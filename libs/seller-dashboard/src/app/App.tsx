import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { createApiClient } from './api';
import { Dashboard, useDashboard } from './context';
import { type LiveStatus, openLiveChannel } from './live';
import { MoneyPage } from './money';
import { OverviewPage } from './overview-page';
import { useRoute } from './router';
import { clearSession, loadSession, type Session, saveSession } from './session';
import { SettingsPage } from './settings';
import { SignIn } from './sign-in';
import { SkillEditor } from './skill-editor';
import { SkillPage } from './skill-page';
import { SkillsPage } from './skills';
import { TransactionPage } from './transaction-page';
import type { SignInResult } from './types';
import { Link, refreshLiveViews, SecretOnce } from './ui';

/** How often open views read balances, payments, requests, statuses and deliveries again without the live channel. */
const POLL_REFRESH_MS = 10_000;
/** With the live channel up, a slow safety poll (a change on another notifier replica's deliveries, a lost frame). */
const LIVE_SAFETY_REFRESH_MS = 60_000;
/** While something does not answer, the open views try again after 2 s, then 4, 8 and every 10 s. */
const OUTAGE_FIRST_RETRY_MS = 2_000;

const NAV: Array<[string, string]> = [
  ['/', 'Overview'],
  ['/skills', 'Skills'],
  ['/money', 'Money'],
  ['/settings', 'Settings'],
];

/** `firstLogin`: a first sign-in made on the inlined sign-in screen (its sk_ key is shown once here). */
export function App(props: { firstLogin?: SignInResult } = {}) {
  const [session, setSession] = useState<Session | undefined>(() => loadSession(new Date()));
  const [firstLogin, setFirstLogin] = useState<SignInResult | undefined>(props.firstLogin);
  const [signedOutReason, setSignedOutReason] = useState<string | undefined>();
  const route = useRoute();
  const outage = useOutage();
  const signOut = (reason?: string) => {
    clearSession();
    setSession(undefined);
    setFirstLogin(undefined);
    setSignedOutReason(reason);
  };
  const api = useMemo(
    () =>
      createApiClient({
        token: () => session?.token,
        onUnauthorized: () => signOut('Your session ended. Sign in again to continue.'),
        onReachable: outage.onReachable,
      }),
    [session?.token],
  );
  const liveStatus = useLiveRefresh(session);
  useOutageRetry(session, outage.since);
  useRouteTitleAndFocus(route);

  if (!session) {
    return (
      <SignIn
        api={api}
        notice={signedOutReason}
        onSignedIn={(result) => {
          setSession(saveSession(result));
          setSignedOutReason(undefined);
          if (result.apiKey) setFirstLogin(result);
        }}
      />
    );
  }

  return (
    <Dashboard.Provider value={{ api, session, signOut }}>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <Header route={route} liveStatus={liveStatus} />
      <main id="main" class="container" tabIndex={-1}>
        {outage.since && <OutageBanner since={outage.since} />}
        {firstLogin?.apiKey ? (
          <SecretOnce
            label="secret API key (sk_)"
            value={firstLogin.apiKey}
            onDone={() => setFirstLogin(undefined)}
          >
            <p>
              Welcome to Paygate. Your servers use this key for the gateway middleware and server-to-server
              calls (<code>Authorization: Bearer sk_…</code>). Your publishable key, safe in web pages, is{' '}
              <code>{firstLogin.publishableKey}</code>.
            </p>
          </SecretOnce>
        ) : (
          <Routes route={route} />
        )}
      </main>
    </Dashboard.Provider>
  );
}

/** Routes that did not answer at their last call: one banner, gone once each answers again. */
function useOutage() {
  const [failing, setFailing] = useState<{ paths: Set<string>; since?: Date }>({ paths: new Set() });
  const onReachable = (reachable: boolean, path: string) =>
    setFailing((current) => {
      if (reachable !== current.paths.has(path)) return current;
      const paths = new Set(current.paths);
      if (reachable) paths.delete(path);
      else paths.add(path);
      return { paths, since: paths.size === 0 ? undefined : (current.since ?? new Date()) };
    });
  return { since: failing.paths.size > 0 ? failing.since : undefined, onReachable };
}

/** Open views read again when the live channel says something changed, or by polling while it is down. */
function useLiveRefresh(session: Session | undefined): LiveStatus {
  const [liveStatus, setLiveStatus] = useState<LiveStatus>('connecting');
  useEffect(() => {
    if (!session) return;
    const channel = openLiveChannel({
      token: session.token,
      onStatus: setLiveStatus,
      onChange: () => refreshLiveViews(),
    });
    return () => channel.close();
  }, [session?.token]);
  useEffect(() => {
    if (!session) return;
    const tick = () => {
      if (document.visibilityState === 'visible') refreshLiveViews();
    };
    const timer = setInterval(tick, liveStatus === 'live' ? LIVE_SAFETY_REFRESH_MS : POLL_REFRESH_MS);
    document.addEventListener('visibilitychange', tick);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', tick);
    };
  }, [session, liveStatus]);
  return liveStatus;
}

/** An outage is retried on its own schedule, so the banner goes soon after the service answers again. */
function useOutageRetry(session: Session | undefined, outageSince: Date | undefined) {
  useEffect(() => {
    if (!session || !outageSince) return;
    let delayMs = OUTAGE_FIRST_RETRY_MS;
    let timer: ReturnType<typeof setTimeout>;
    const retry = () => {
      if (document.visibilityState === 'visible') refreshLiveViews();
      delayMs = Math.min(delayMs * 2, POLL_REFRESH_MS);
      timer = setTimeout(retry, delayMs);
    };
    timer = setTimeout(retry, delayMs);
    return () => clearTimeout(timer);
  }, [session, outageSince]);
}

/** The page's title follows the route; after an in-app navigation the focus moves to the new content. */
function useRouteTitleAndFocus(route: string) {
  const firstRoute = useRef(true);
  useEffect(() => {
    const title = NAV.find(([path]) => isCurrent(route, path))?.[1];
    document.title = `${title ? `${title} · ` : ''}Paygate seller dashboard`;
    // After an in-app navigation, move focus to the new content so keyboard and screen-reader users start there.
    if (firstRoute.current) firstRoute.current = false;
    else document.getElementById('main')?.focus();
  }, [route]);
}

/** The navigation, who is signed in, how the data stays current, and whether this is test mode. */
function Header(props: { route: string; liveStatus: LiveStatus }) {
  const { api, session, signOut } = useDashboard();
  const { liveStatus } = props;
  return (
    <header class="container">
      <nav aria-label="Main">
        <ul>
          <li>
            <strong>Paygate</strong>
          </li>
        </ul>
        <ul>
          {NAV.map(([path, label]) => (
            <li key={path}>
              <Link to={path} current={isCurrent(props.route, path)}>
                {label}
              </Link>
            </li>
          ))}
          <li>
            <button
              type="button"
              class="outline secondary small"
              onClick={async () => {
                // Ends this session at Paygate (every device), not only in this tab; signed out here either way.
                await api.request('POST', '/api/v1/auth/sign-out').catch(() => undefined);
                signOut('You signed out.');
              }}
            >
              Sign out
            </button>
          </li>
        </ul>
      </nav>
      <p class="who">
        Signed in as <code>{session.walletAddress}</code>{' '}
        <span class={`live-status ${liveStatus}`} data-testid="live-status" data-status={liveStatus}>
          {liveStatus === 'live'
            ? '● Live: updates as they happen'
            : liveStatus === 'connecting'
              ? 'Connecting to live updates…'
              : `Updates every ${POLL_REFRESH_MS / 1000} s (live updates unavailable)`}
        </span>
      </p>
      {session.mode === 'test' && (
        <p class="test-mode" data-testid="test-mode">
          <strong>Test mode</strong>: this Paygate takes test USDC on a test network; keys start with{' '}
          <code>sk_test_</code> and <code>pk_test_</code>. Nothing here is real money.
        </p>
      )}
    </header>
  );
}

function OutageBanner(props: { since: Date }) {
  return (
    <p class="outage" role="alert" data-testid="outage">
      <strong>Paygate is not answering</strong> (since {props.since.toISOString().slice(11, 16)} UTC). What
      you see may be out of date and actions may fail; nothing is lost. The page tries again within{' '}
      {POLL_REFRESH_MS / 1000} seconds.
    </p>
  );
}

function isCurrent(route: string, path: string): boolean {
  return path === '/' ? route === '/' : route.startsWith(path);
}

function Routes(props: { route: string }) {
  const { route } = props;
  if (route === '/skills/new') return <SkillEditor />;
  const edit = /^\/skills\/([a-z0-9-]+)\/edit$/.exec(route);
  if (edit) return <SkillEditor name={edit[1]!} />;
  const skill = /^\/skills\/([a-z0-9-]+)$/.exec(route);
  if (skill) return <SkillPage name={skill[1]!} />;
  const transaction = /^\/money\/transactions\/([A-Za-z0-9_-]+)$/.exec(route);
  if (transaction) return <TransactionPage id={transaction[1]!} />;
  if (route.startsWith('/money')) return <MoneyPage />;
  if (route.startsWith('/settings')) return <SettingsPage />;
  if (route.startsWith('/skills')) return <SkillsPage />;
  return <OverviewPage />;
}
