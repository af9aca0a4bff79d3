import { render } from 'preact';
import { createApiClient } from './api';
import { handOver } from './handover';
import { loadSession } from './session';
import { SignIn } from './sign-in';
import { browserWallet, discoverWallets } from './wallet';

/** The inlined first screen (sign-in alone); the rest of the dashboard loads meanwhile and takes over after. */
const root = document.getElementById('app');
if (root) {
  const appSrc = root.dataset.appSrc!;
  const cssHref = root.dataset.cssHref!;
  const startApp = () => import(appSrc);
  if (loadSession(new Date())) void startApp();
  else {
    discoverWallets(() => undefined);
    root.textContent = '';
    render(
      <SignIn
        api={createApiClient({ token: () => undefined })}
        onSignedIn={(result) => {
          handOver({ result, wallet: browserWallet() });
          render(
            <main class="container">
              <p aria-busy="true">Loading the dashboard…</p>
            </main>,
            root,
          );
          void startApp();
        }}
      />,
      root,
    );
    // Warm the cache for the app (and for later visits, which link these files instead of inlining).
    const buildId = root.dataset.buildId!;
    // Each file is read to its end (a fetch answers at its headers): only then is it in the cache.
    const cache = async (url: string) => {
      const answer = await fetch(url);
      await answer.blob();
      return answer.ok;
    };
    Promise.all([cache(appSrc), cache(cssHref)])
      .then((cached) => {
        if (cached.every(Boolean))
          // Not a credential: only "this browser has build <id> cached"; the page answers the same either way.
          // biome-ignore lint/suspicious/noDocumentCookie: the Cookie Store API is missing in Firefox and Safari.
          document.cookie = `paygate_dashboard_build=${buildId}; path=${root.dataset.basePath ?? '/dashboard'}; max-age=31536000; SameSite=Strict`;
      })
      .catch(() => undefined);
  }
}
