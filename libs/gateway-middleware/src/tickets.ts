import { TICKET_HEADER } from '@paygate/protocol';
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
  kind: 'payPerCall' | 'subscription' | 'product' | 'service';
  txHash: string;
  amount: string;
}

type Outcome =
  | { ok: true; payment: X402Payment }
  | {
      ok: false;
      status: number;
      body: { error: string; reason: string; message: string; [k: string]: unknown };
    };

/**
 * Single-use ids (tickets, request nonces) in process memory until they expire, at most `maxEntries`: when
 * full after dropping the expired ones, the oldest is forgotten (only an id that old could then be replayed).
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

/**
 * Verifies TICKET-mode JWTs: ES256 only (a token signed with `none` or HS256 is refused before any key is
 * used), against Paygate's JWKS by kid (JwksKeys), with issuer, audience (the skill), method, path and expiry checked, and single-use
 * tickets (pay-per-call, product, service) accepted once.
 */
export class TicketVerifier {
  private readonly keys: JwksKeys;
  /** Signature checks are the costly part; a subscriber repeating the same ticket pays for one per minute. */
  private readonly verified = new LRUCache<string, { claims: TicketClaims; until: number }>({
    max: MAX_VERIFIED,
  });
  private readonly replay: TicketReplayStore;

  constructor(
    private readonly api: PaygateApi,
    private readonly options: TicketOptions,
    /** Paygate's issuer and network (GET /api/verify); shared with the gateway's 402 answers when given. */
    private readonly parameters = new PaymentParametersSource(api, {}),
  ) {
    if (!options?.skill) throw new TypeError('ticket: options.skill (the skill name) is required');
    this.replay = options.replayStore ?? new MemoryReplayStore();
    this.keys = new JwksKeys(api);
  }

  private refuse(reason: string, message: string, status = 401): Outcome {
    return { ok: false, status, body: { error: 'Invalid ticket', reason, message } };
  }

  async verify(req: Request): Promise<Outcome> {
    const token = req.header(TICKET_HEADER);
    const path = `${req.baseUrl}${req.path}`;
    if (!token) {
      const base = this.options.basePath?.replace(/\/$/, '') ?? '';
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
    const parameters = await this.parameters.get();
    if (!parameters?.issuer) {
      throw new PaygateUnavailableError(
        `Paygate at ${this.api.baseUrl} did not say which issuer signs tickets`,
      );
    }
    let claims: TicketClaims;
    const cached = this.verified.get(token);
    if (cached && cached.until > Date.now() && cached.claims.exp * 1000 > Date.now()) {
      claims = cached.claims;
    } else {
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
          issuer: parameters.issuer,
          clockTolerance: this.options.clockToleranceSeconds ?? 5,
        });
        claims = payload as JWTPayload & TicketClaims;
      } catch (error) {
        const reason =
          error instanceof errors.JWTExpired
            ? 'ticket_expired'
            : error instanceof errors.JWTClaimValidationFailed && error.claim === 'aud'
              ? 'wrong_audience'
              : 'invalid_ticket';
        return this.refuse(reason, (error as Error).message);
      }
      this.verified.set(token, { claims, until: Date.now() + VERIFIED_TTL_MS });
    }
    const base = this.options.basePath?.replace(/\/$/, '') ?? '';
    if (claims.method !== req.method || `${base}${claims.path}` !== path) {
      return this.refuse(
        'wrong_resource',
        `ticket is for ${claims.method} ${base}${claims.path}, not ${req.method} ${path}`,
        403,
      );
    }
    if (claims.kind !== 'subscription' && !(await this.replay.markUsed(claims.jti, claims.exp * 1000))) {
      return this.refuse('ticket_already_used', 'this single-use ticket was already accepted');
    }
    return {
      ok: true,
      payment: {
        txHash: claims.txHash,
        amount: claims.amount,
        payer: claims.sub,
        network: parameters.network,
        ...(claims.kind !== 'payPerCall' ? { type: claims.kind } : {}),
        ticketId: claims.jti,
      },
    };
  }
}
