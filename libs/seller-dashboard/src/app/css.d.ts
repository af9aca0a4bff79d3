// Stylesheets imported for their side effect: esbuild bundles them; the type checker needs only their names.
declare module '*.css';
