import { type PaymentKind, TICKET_HEADER } from '@paygate/protocol';
import type { Request } from 'express';
import { decodeProtectedHeader, errors, type JWTPayload, jwtVerify } from 'jose';
import { LRUCache } from 'lru-cache';
import { JwksKeys } from './jwks';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';
import { PaymentParametersSource } from './payment-parameters';
import type { TicketOptions, TicketReplayStore, X402Payment } from './types';

interface TicketClaims {
  iss: string;
  sub: string;
  aud: string;
  jti: string;
  exp: number;
  method: string;
  path: string;
  kind: PaymentKind;
  txHash: string;
  amount: string;
}

/** The 402 without a ticket keeps the payment answers' 402 shape; every other status is the error envelope. */
type RefusalBody =
  | { error: string; reason: string; message: string; paymentUrl: string }
  | { error: { code: string; message: string } };

type Outcome = { ok: true; payment: X402Payment } | { ok: false; status: number; body: RefusalBody };

type Refusal = Extract<Outcome, { ok: false }>;
/** Claims are wrapped: a token's payload is the signer's JSON and may hold any key, `ok` included. */
type VerifiedClaims = { ok: true; claims: TicketClaims };

/**
 * Single-use ids (tickets, request nonces) in memory until they expire, at most `maxEntries`: when full after
 * dropping the expired ones, the oldest is forgotten (only an id that old could then be replayed).
 */
export class MemoryReplayStore implements TicketReplayStore {
  private readonly used = new Map<string, number>();
  constructor(private readonly maxEntries = 100_000) {}
  markUsed(ticketId: string, expiresAtMs: number): boolean {
    if (this.used.has(ticketId)) return false;
    if (this.used.size >= this.maxEntries) {
      const now = Date.now();
      for (const [id, exp] of this.used) if (exp < now) this.used.delete(id);
      for (const id of this.used.keys()) {
        if (this.used.size < this.maxEntries) break;
        this.used.delete(id);
      }
    }
    this.used.set(ticketId, expiresAtMs);
    return true;
  }
}

/** A token whose signature was checked is not checked again for this long (its claims are, every time). */
const VERIFIED_TTL_MS = 60_000;
const MAX_VERIFIED = 10_000;

/** TICKET-mode JWTs: ES256 by Paygate's key, claims checked; single-use (non-subscription) ones pass once. */
export class TicketVerifier {
  private readonly keys: JwksKeys;
  /** Signature checks are the costly part; a subscriber repeating the same ticket pays for one per minute. */
  private readonly verified = new LRUCache<string, { claims: TicketClaims; until: number }>({
    max: MAX_VERIFIED,
  });
  private readonly replay: TicketReplayStore;
  private readonly basePath: string;

  constructor(
    private readonly api: PaygateApi,
    private readonly options: TicketOptions,
    /** Paygate's issuer and network (GET /api/verify); shared with the gateway's 402 answers when given. */
    private readonly parameters = new PaymentParametersSource(api, {}),
  ) {
    if (!options?.skill) throw new TypeError('ticket: options.skill (the skill name) is required');
    this.replay = options.replayStore ?? new MemoryReplayStore();
    this.keys = new JwksKeys(api);
    this.basePath = options.basePath?.replace(/\/$/, '') ?? '';
  }

  private refuse(reason: string, message: string, status = 401): Refusal {
    return { ok: false, status, body: { error: { code: reason, message } } };
  }

  async verify(req: Request): Promise<Outcome> {
    const token = req.header(TICKET_HEADER);
    const path = `${req.baseUrl}${req.path}`;
    if (!token) return this.ticketRequired(path);
    const parameters = await this.parameters.get();
    if (!parameters?.issuer) {
      throw new PaygateUnavailableError(
        `Paygate at ${this.api.baseUrl} did not say which issuer signs tickets`,
      );
    }
    const verified = await this.claimsOf(token, parameters.issuer);
    if (!verified.ok) return verified;
    const claims = verified.claims;
    const claimed = `${this.basePath}${claims.path}`;
    if (claims.method !== req.method || claimed !== path) {
      return this.refuse(
        'wrong_resource',
        `ticket is for ${claims.method} ${claimed}, not ${req.method} ${path}`,
        403,
      );
    }
    if (claims.kind !== 'subscription' && !(await this.replay.markUsed(claims.jti, claims.exp * 1000))) {
      return this.refuse('ticket_already_used', 'this single-use ticket was already accepted');
    }
    return { ok: true, payment: paymentOf(claims, parameters.network) };
  }

  /** 402 with where to pay for the endpoint (its path below basePath). */
  private ticketRequired(path: string): Refusal {
    const base = this.basePath;
    const endpointPath = base && path.startsWith(base) ? path.slice(base.length) || '/' : path;
    return {
      ok: false,
      status: 402,
      body: {
        error: 'Ticket required',
        reason: 'missing_ticket',
        message: `pay at the paymentUrl, then call again with the ticket in ${TICKET_HEADER}`,
        paymentUrl: `${this.api.baseUrl}/api/v1/skills/${this.options.skill}${endpointPath}`,
      },
    };
  }

  /** The token's claims: remembered from a recent signature check while both it and the token are valid. */
  private async claimsOf(token: string, issuer: string): Promise<VerifiedClaims | Refusal> {
    const cached = this.verified.get(token);
    if (cached && cached.until > Date.now() && cached.claims.exp * 1000 > Date.now()) {
      return { ok: true, claims: cached.claims };
    }
    const verified = await this.checkSignature(token, issuer);
    if (verified.ok)
      this.verified.set(token, { claims: verified.claims, until: Date.now() + VERIFIED_TTL_MS });
    return verified;
  }

  /** The token's ES256 signature by Paygate's published key of its kid, its issuer, audience and expiry. */
  private async checkSignature(token: string, issuer: string): Promise<VerifiedClaims | Refusal> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      return this.refuse('malformed_ticket', 'not a JWT');
    }
    // Pin the algorithm before looking at any key: `none`, HS256 (public key as HMAC secret) and others are refused.
    if (header.alg !== 'ES256') {
      return this.refuse('wrong_algorithm', `tickets are ES256; ${header.alg} is refused`);
    }
    const kid = header.kid;
    if (!kid) return this.refuse('unknown_key', 'ticket has no kid');
    const key = await this.keys.key(kid);
    if (!key) return this.refuse('unknown_key', `no published key ${kid}`);
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['ES256'],
        audience: this.options.skill,
        issuer,
        clockTolerance: this.options.clockToleranceSeconds ?? 5,
      });
      return { ok: true, claims: payload as JWTPayload & TicketClaims };
    } catch (error) {
      return this.refuse(jwtFailureReason(error), (error as Error).message);
    }
  }
}

function jwtFailureReason(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'ticket_expired';
  if (error instanceof errors.JWTClaimValidationFailed && error.claim === 'aud') return 'wrong_audience';
  return 'invalid_ticket';
}

function paymentOf(claims: TicketClaims, network: string): X402Payment {
  return {
    txHash: claims.txHash,
    amount: claims.amount,
    payer: claims.sub,
    network,
    ...(claims.kind !== 'payPerCall' ? { type: claims.kind } : {}),
    ticketId: claims.jti,
  };
}
