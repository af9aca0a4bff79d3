# syntax=docker/dockerfile:1
#
# One image for every Paygate service, running compiled JavaScript. SERVICE (build arg, overridable at run
# time) picks which one runs: services/$SERVICE/dist/main.js.
#
#   docker build -t paygate:dev .                          # default target: runtime
#   docker run -e SERVICE=registry -e PORT=8081 ... paygate:dev
#   docker build --target chain -t paygate-chain:dev .     # local anvil + test USDC
#
# Stages: base (node + pnpm) -> deps (pnpm fetch: the store, keyed on the lockfile only)
#         -> build (full install, every workspace; deploy/scripts/build-dist.ts compiles each service's main,
#            the edge and the local chain to one CommonJS file each, the checkout widget embedded)
#         -> prune (production dependencies only; no tsx, esbuild or TypeScript; only what runs is kept)
#         -> app (plain node, non-root, no pnpm) -> chain | runtime
# deploy/test/dockerfile.test.ts checks this file statically (COPY sources, build outputs, runtime stage).

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

# Only the lockfile (and the patches it names) decides this layer, so editing sources never re-downloads packages.
FROM base AS deps
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./
COPY patches ./patches
RUN pnpm fetch --frozen-lockfile --store-dir "$PNPM_STORE_DIR"

FROM deps AS build
COPY . .
RUN pnpm install --offline --frozen-lockfile --store-dir "$PNPM_STORE_DIR" \
 && pnpm exec tsx deploy/scripts/build-dist.ts

# Production dependencies of the services and libs only (a fresh install: nothing of the build's dev tools
# stays), then only what the images run: the compiled files, the SQL the escrow ledger applies at start-up,
# the route table (health checks), the test USDC artifact (chain target). esbuild (the checkout widget's
# build-time bundler, embedded already) and TypeScript (a peer of viem) are removed. The services find their
# packages through NODE_PATH (pnpm's hoisted set: library code bundled into a service requires that
# library's dependencies).
FROM build AS prune
RUN set -eux; \
    find . -name node_modules -prune -exec rm -rf {} +; \
    pnpm install --offline --frozen-lockfile --prod --filter './services/*' --filter './libs/*' \
      --store-dir "$PNPM_STORE_DIR"; \
    rm -rf node_modules/.pnpm/esbuild@* node_modules/.pnpm/@esbuild+* node_modules/.pnpm/typescript@* \
      node_modules/.pnpm/node_modules/esbuild node_modules/.pnpm/node_modules/@esbuild \
      node_modules/.pnpm/node_modules/typescript; \
    mkdir -p /out; \
    cp -a --parents services/*/dist services/escrow-ledger/sql deploy/dist deploy/build/TestUSDC.json \
      deploy/routes.json package.json /out/; \
    cp -a node_modules /out/node_modules; \
    cd /out; \
    for pkg in tsx esbuild typescript jest; do \
      if NODE_PATH=/out/node_modules/.pnpm/node_modules node -e "require.resolve('$pkg')" 2>/dev/null; then \
        echo "$pkg must not be in the runtime image" >&2; exit 1; \
      fi; \
    done; \
    NODE_PATH=/out/node_modules/.pnpm/node_modules node -e "require.resolve('express'); require.resolve('@foundry-rs/anvil/package.json')"

FROM ${NODE_IMAGE} AS app
ENV NODE_ENV=production \
    NODE_PATH=/app/node_modules/.pnpm/node_modules
RUN groupadd --system --gid 10001 paygate \
 && useradd --system --uid 10001 --gid paygate --create-home --home-dir /home/paygate \
      --shell /usr/sbin/nologin paygate
WORKDIR /app
# Owned by root, read-only for the service user.
COPY --from=prune /out /app
USER 10001:10001

# Local development chain: anvil (from the @foundry-rs/anvil npm package) on 8545 with the test
# USDC deployed. Never used in production.
FROM app AS chain
ENV ANVIL_HOST=0.0.0.0 \
    ANVIL_PORT=8545
EXPOSE 8545
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=10 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.ANVIL_PORT||8545),{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({jsonrpc:'2.0',id:1,method:'eth_chainId',params:[]})}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "deploy/dist/chain/start-local-chain.js"]

# The default target: one of the seven services.
FROM app AS runtime
ARG SERVICE=registry
ENV SERVICE=${SERVICE}
EXPOSE 8081 8082 8083 8084 8085 8086 8087
# PORT falls back to the service's port in deploy/routes.json, as config.ts does.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=5 \
  CMD ["node", "-e", "const p=process.env.PORT||require('/app/deploy/routes.json').services[process.env.SERVICE]?.port;fetch('http://127.0.0.1:'+p+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["sh", "-c", "test -f \"services/${SERVICE}/dist/main.js\" || { echo \"unknown SERVICE '${SERVICE}' (expected a directory under services/)\" >&2; exit 64; }; exec node --enable-source-maps \"services/${SERVICE}/dist/main.js\""]
