// Stylesheets the app imports for their side effect; esbuild bundles them (build.ts), the type checker only needs to
// know they exist.
declare module '*.css';
