# syntax=docker/dockerfile:1
#
# One image for every Paygate service. SERVICE (build arg, overridable at run time) picks which
# one runs: services/$SERVICE/src/main.ts, executed from source by tsx.
#
#   docker build -t paygate:dev .                          # default target: runtime
#   docker run -e SERVICE=registry -e PORT=8081 ... paygate:dev
#   docker build --target chain -t paygate-chain:dev .     # local anvil + test USDC
#
# Stages: base (node + pnpm) -> deps (pnpm fetch: the store, keyed on the lockfile only)
#         -> build (full install, every workspace) -> prune (production deps only, plus tsx)
#         -> app (non-root, no pnpm) -> chain | runtime

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS base
ENV CI=true \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0 \
    PNPM_STORE_DIR=/pnpm/store
# The corepack bundled with older Node 20 images cannot verify current pnpm signatures.
RUN npm install --global corepack@0.36.0 \
 && corepack enable pnpm \
 && corepack prepare pnpm@9.15.9 --activate
WORKDIR /app

# Only the lockfile decides this layer, so editing sources never re-downloads packages.
FROM base AS deps
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json .npmrc ./
RUN pnpm fetch --frozen-lockfile --store-dir "$PNPM_STORE_DIR"

FROM deps AS build
COPY . .
RUN pnpm install --offline --frozen-lockfile --store-dir "$PNPM_STORE_DIR"

# Production dependencies only. tsx (a root devDependency) runs the services, so it and its only
# dependency, esbuild (with its platform binary), are carried over from the full install: the
# same lockfile-pinned packages, no new resolution.
FROM build AS prune
RUN set -eux; \
    mkdir /tmp/keep; \
    cp -a node_modules/.pnpm/tsx@* node_modules/.pnpm/esbuild@* node_modules/.pnpm/@esbuild+* /tmp/keep/; \
    pnpm install --offline --frozen-lockfile --prod --config.confirmModulesPurge=false --store-dir "$PNPM_STORE_DIR"; \
    cp -an /tmp/keep/. node_modules/.pnpm/; \
    tsx_dir="$(cd /tmp/keep && ls -d tsx@*)"; \
    ln -sfn ".pnpm/${tsx_dir}/node_modules/tsx" node_modules/tsx; \
    mkdir -p node_modules/.bin; \
    ln -sfn ../tsx/dist/cli.mjs node_modules/.bin/tsx; \
    rm -rf /tmp/keep; \
    find services libs deploy -path '*/node_modules' -prune -o -type d \( -name test -o -name __tests__ \) -print \
      | xargs rm -rf; \
    node_modules/.bin/tsx --version

FROM ${NODE_IMAGE} AS app
ENV NODE_ENV=production
RUN groupadd --system --gid 10001 paygate \
 && useradd --system --uid 10001 --gid paygate --create-home --home-dir /home/paygate \
      --shell /usr/sbin/nologin paygate
WORKDIR /app
# Owned by root, read-only for the service user; tsx writes its cache under /tmp.
COPY --from=prune /app /app
USER 10001:10001

# Local development chain: anvil (from the @foundry-rs/anvil npm package) on 8545 with the test
# USDC deployed. Never used in production.
FROM app AS chain
ENV ANVIL_HOST=0.0.0.0 \
    ANVIL_PORT=8545
EXPOSE 8545
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=10 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.ANVIL_PORT||8545),{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({jsonrpc:'2.0',id:1,method:'eth_chainId',params:[]})}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node_modules/.bin/tsx", "deploy/scripts/start-local-chain.ts"]

# The default target: one of the seven services.
FROM app AS runtime
ARG SERVICE=registry
ENV SERVICE=${SERVICE}
EXPOSE 8081 8082 8083 8084 8085 8086 8087
# PORT falls back to the service's port in deploy/routes.json, as config.ts does.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=5 \
  CMD ["node", "-e", "const p=process.env.PORT||require('/app/deploy/routes.json').services[process.env.SERVICE]?.port;fetch('http://127.0.0.1:'+p+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["sh", "-c", "test -f \"services/${SERVICE}/src/main.ts\" || { echo \"unknown SERVICE '${SERVICE}' (expected a directory under services/)\" >&2; exit 64; }; exec node_modules/.bin/tsx \"services/${SERVICE}/src/main.ts\""]
