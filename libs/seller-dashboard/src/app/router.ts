import { useEffect, useState } from 'preact/hooks';

let basePath = '/dashboard';
export function setBasePath(path: string): void {
  basePath = path.replace(/\/$/, '');
}

/** The route inside the dashboard: "/skills/weather" for /dashboard/skills/weather. */
function currentRoute(): string {
  const path = window.location.pathname;
  const inner = path.startsWith(basePath) ? path.slice(basePath.length) : path;
  return inner === '' ? '/' : inner;
}

export function href(route: string): string {
  return `${basePath}${route === '/' ? '/' : route}`;
}

export function navigate(route: string): void {
  if (currentRoute() === route) return;
  window.history.pushState({}, '', href(route));
  window.dispatchEvent(new Event('paygate:navigate'));
  window.scrollTo(0, 0);
}

export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const update = () => setRoute(currentRoute());
    window.addEventListener('popstate', update);
    window.addEventListener('paygate:navigate', update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener('paygate:navigate', update);
    };
  }, []);
  return route;
}
