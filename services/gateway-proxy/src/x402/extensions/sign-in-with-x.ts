import { SIGN_IN_WITH_X_HEADER } from '@paygate/protocol';
import {
  parseSIWxHeader,
  type SIWxPayload,
  validateSIWxMessage,
  verifySIWxSignature,
} from '@x402/extensions/sign-in-with-x';
import { verifyMessage as recoverMessageSigner } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { createPublicClient, http, isErc6492Signature } from 'viem';
import type { GatewayProxyConfig } from '../../config';
import type { GatewayDatabase } from '../../db';
import { ChainUnavailableError } from '../../errors';
import type { PaymentFailure } from '../../payments/failures';
import { decideReuse } from '../../payments/reuse-rules';
import type { PaymentClaim, Purchase } from '../../payments/types';
import { SIWX_REASONS } from '../../reasons';

/** x402's sign-in-with-x: a subscriber proves its wallet with a signed message instead of paying again. */

export const SIWX_HEADER = SIGN_IN_WITH_X_HEADER.toLowerCase();

/** How old a signed message may be (the extension's default; the challenge asks for as long). */
const MAX_AGE_MS = 5 * 60_000;
/** Nonces are kept past the age a message can have (plus clock skew), then swept. */
const NONCE_KEEP_MS = MAX_AGE_MS + 60_000;
const SWEEP_EVERY_INSERTS = 100;
const SWEEP_BATCH = 500;
/** The header is a base64 JSON message of a few hundred bytes: anything much larger is not one. */
const MAX_HEADER_BYTES = 8192;

type SignInFailure = Omit<PaymentFailure, 'reason'> & { reason: string };

type SignInRefused = { ok: false; status: 402 | 503; failure: SignInFailure };
type SignInOutcome = { ok: true; address: string } | SignInRefused;
type SubscriptionOutcome = { ok: true; claim: PaymentClaim; address: string } | SignInRefused;

/** `origin`: the one messages must name. */
type SignInSettings = Pick<GatewayProxyConfig, 'chainId' | 'rpcUrl' | 'rpcTimeoutMs' | 'now'> & {
  origin: string;
};

export class SignInWithX {
  private readonly client;
  private inserts = 0;

  constructor(
    private readonly db: Kysely<GatewayDatabase>,
    private readonly settings: SignInSettings,
  ) {
    // One request per check, bounded by the RPC timeout, no retries: a slow chain is a 503, never a wait.
    this.client = createPublicClient({
      transport: http(settings.rpcUrl, { timeout: settings.rpcTimeoutMs, retryCount: 0 }),
    });
  }

  /** The wallet a header proves, its nonce spent; `origin` overrides the gateway's (a seller middleware's origin). */
  async verify(header: string, origin: string = this.settings.origin): Promise<SignInOutcome> {
    if (header.length > MAX_HEADER_BYTES) {
      return refused(SIWX_REASONS.payload, `the ${SIWX_HEADER} header is over ${MAX_HEADER_BYTES} bytes`);
    }
    let payload: SIWxPayload;
    try {
      payload = parseSIWxHeader(header);
    } catch (error) {
      return refused(SIWX_REASONS.payload, error instanceof Error ? error.message : 'unreadable');
    }
    // Both origins are parsed ones: the gateway's own, or the one /api/verify/sign-in checked.
    const validation = await validateSIWxMessage(payload, new URL(origin), { maxAge: MAX_AGE_MS });
    if (!validation.isValid) return refused(validation.invalidReason, validation.invalidMessage);
    if (payload.chainId !== `eip155:${this.settings.chainId}`) {
      return refused(
        SIWX_REASONS.chainId,
        `chainId must be eip155:${this.settings.chainId} (the chain the subscription was paid on)`,
      );
    }
    if (!/^0x[0-9a-fA-F]{40}$/.test(payload.address)) {
      return refused(SIWX_REASONS.payload, 'address must be a 0x-prefixed 20-byte hex address');
    }
    let chainDown = false;
    const verification = await verifySIWxSignature(payload, {
      evmVerifier: async (args) => {
        try {
          return await this.signedBy(args);
        } catch (error) {
          if (error instanceof ChainUnavailableError) chainDown = true;
          throw error;
        }
      },
    });
    if (chainDown)
      return refused(SIWX_REASONS.unavailable, 'the chain did not answer the wallet signature check', 503);
    if (!verification.isValid) return refused(verification.invalidReason, verification.invalidMessage);
    const address = payload.address.toLowerCase();
    if (!(await this.spendNonce(payload, address))) {
      return refused(SIWX_REASONS.nonce, 'this message was already used: sign a new one');
    }
    return { ok: true, address };
  }

  /** The newest subscription claim in scope that the reuse rules serve; a wallet that never paid: `siwx_not_subscribed`. */
  async subscriptionFor(header: string, purchase: Purchase, origin?: string): Promise<SubscriptionOutcome> {
    const signedIn = await this.verify(header, origin);
    if (!signedIn.ok) return signedIn;
    const claims = (await this.db
      .selectFrom('payment_claims')
      .selectAll()
      .where(sql`lower(payer)`, '=', signedIn.address)
      .where('kind', '=', 'subscription')
      .where((eb: any) =>
        purchase.skillId !== null
          ? eb('skill_id', '=', purchase.skillId)
          : eb.and([eb('skill_id', 'is', null), eb('seller_id', '=', purchase.sellerId)]),
      )
      .orderBy('access_expires_at', 'desc')
      .limit(20)
      .execute()) as PaymentClaim[];
    if (claims.length === 0) {
      return refused(
        SIWX_REASONS.notSubscribed,
        `wallet ${signedIn.address} has no subscription here: pay for one (this 402's accepts)`,
      );
    }
    const now = this.settings.now();
    let first: SignInFailure | undefined;
    for (const claim of claims) {
      const decision = decideReuse(claim, null, purchase, now);
      if (decision.kind === 'serve') return { ok: true, claim, address: signedIn.address };
      if (decision.kind === 'refuse') first ??= decision.failure;
    }
    return first
      ? { ok: false, status: 402, failure: first }
      : refused(SIWX_REASONS.notSubscribed, 'no usable subscription');
  }

  /** EIP-191 from an EOA checked here; otherwise the chain decides (ERC-1271, or ERC-6492 for a wallet not deployed). */
  private async signedBy(args: {
    address: `0x${string}`;
    message: string;
    signature: `0x${string}`;
  }): Promise<boolean> {
    if (/^0x[0-9a-fA-F]{130}$/.test(args.signature)) {
      try {
        if (recoverMessageSigner(args.message, args.signature).toLowerCase() === args.address.toLowerCase())
          return true;
      } catch {
        // not an ECDSA signature of this message: a contract wallet's, for the chain to judge
      }
    }
    // viem's verifyMessage answers false when the chain is silent: reading the code first makes an outage a 503.
    let code: string | undefined;
    try {
      code = await this.client.getCode({ address: args.address });
    } catch (error) {
      if (transportFailed(error)) throw new ChainUnavailableError(String((error as Error)?.message ?? error));
      return false;
    }
    if ((!code || code === '0x') && !isErc6492Signature(args.signature)) return false;
    return this.client.verifyMessage(args);
  }

  private async spendNonce(payload: SIWxPayload, address: string): Promise<boolean> {
    const now = this.settings.now();
    const issuedAt = new Date(payload.issuedAt);
    const expiresAt = new Date(Math.max(issuedAt.getTime(), now.getTime()) + NONCE_KEEP_MS);
    const inserted = await this.db
      .insertInto('siwx_nonces')
      .values({
        nonce: payload.nonce,
        address,
        domain: payload.domain,
        expires_at: expiresAt,
        created_at: now,
      })
      .onConflict((oc: any) => oc.column('nonce').doNothing())
      .returning('nonce')
      .executeTakeFirst();
    if (++this.inserts % SWEEP_EVERY_INSERTS === 0) void this.sweep().catch(() => undefined);
    return inserted !== undefined;
  }

  async sweep(): Promise<number> {
    const result = await sql`
      delete from siwx_nonces where nonce in (
        select nonce from siwx_nonces where expires_at < ${this.settings.now()} limit ${SWEEP_BATCH}
      )`.execute(this.db);
    return Number(result.numAffectedRows ?? 0);
  }
}

const TRANSPORT_ERRORS = new Set([
  'HttpRequestError',
  'TimeoutError',
  'WebSocketRequestError',
  'SocketClosedError',
]);
const MAX_CAUSES = 10;

function transportFailed(error: unknown): boolean {
  let current = error as { name?: string; cause?: unknown } | undefined;
  for (let depth = 0; current && depth < MAX_CAUSES; depth++) {
    if (current.name && TRANSPORT_ERRORS.has(current.name)) return true;
    current = current.cause as typeof current;
  }
  return false;
}

function refused(reason: string, message: string, status: 402 | 503 = 402): SignInRefused {
  return { ok: false, status, failure: { reason, message } };
}
