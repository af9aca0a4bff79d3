import { createPublicKey, type KeyObject } from 'node:crypto';
import { TICKET_HEADER } from '@paygate/agent-client';
import type { Request } from 'express';
import jwt from 'jsonwebtoken';
import { type PaygateApi, PaygateUnavailableError } from './paygate-api';
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

/** Single-use ticket ids in process memory, swept as they expire. */
export class MemoryReplayStore implements TicketReplayStore {
  private readonly used = new Map<string, number>();
  markUsed(ticketId: string, expiresAtMs: number): boolean {
    const now = Date.now();
    if (this.used.size > 100_000) for (const [id, exp] of this.used) if (exp < now) this.used.delete(id);
    if (this.used.has(ticketId)) return false;
    this.used.set(ticketId, expiresAtMs);
    return true;
  }
}

const JWKS_TTL_MS = 10 * 60_000;
/** A token whose signature was checked is not checked again for this long (its claims are, every time). */
const VERIFIED_TTL_MS = 60_000;
const MAX_VERIFIED = 10_000;
const JWKS_MIN_REFETCH_MS = 30_000;

/**
 * Verifies TICKET-mode JWTs: ES256 only (a token signed with `none` or HS256 is refused before any key is
 * used), against Paygate's JWKS by kid (cached; refetched at most every 30 s when an unknown kid appears, so
 * keys can rotate), with issuer, audience (the skill), method, path and expiry checked, and single-use
 * tickets (pay-per-call, product, service) accepted once.
 */
export class TicketVerifier {
  private keys = new Map<string, KeyObject>();
  /** Signature checks are the costly part; a subscriber repeating the same ticket pays for one per minute. */
  private readonly verified = new Map<string, { claims: TicketClaims; until: number }>();
  private fetchedAt = 0;
  private readonly replay: TicketReplayStore;

  constructor(
    private readonly api: PaygateApi,
    private readonly options: TicketOptions,
  ) {
    if (!options?.skill) throw new TypeError('ticket: options.skill (the skill name) is required');
    this.replay = options.replayStore ?? new MemoryReplayStore();
  }

  private async loadKeys(force: boolean): Promise<void> {
    const age = Date.now() - this.fetchedAt;
    if (!force && age < JWKS_TTL_MS) return;
    if (force && age < JWKS_MIN_REFETCH_MS) return;
    const res = await this.api.request('/.well-known/jwks.json');
    if (!res.ok) throw new PaygateUnavailableError(`Paygate answered ${res.status} for its JWKS`);
    const { keys } = (await res.json()) as {
      keys: Array<{ kid: string; kty: string; crv: string; x: string; y: string }>;
    };
    const next = new Map<string, KeyObject>();
    for (const jwk of keys) {
      if (jwk.kty !== 'EC' || jwk.crv !== 'P-256' || !jwk.kid) continue;
      next.set(
        jwk.kid,
        createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' }),
      );
    }
    this.keys = next;
    this.fetchedAt = Date.now();
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
    const parameters = await this.api.paymentParameters();
    let claims: TicketClaims;
    const cached = this.verified.get(token);
    if (cached && cached.until > Date.now() && cached.claims.exp * 1000 > Date.now()) {
      claims = cached.claims;
    } else {
      const decoded = jwt.decode(token, { complete: true });
      if (!decoded || typeof decoded.payload === 'string')
        return this.refuse('malformed_ticket', 'not a JWT');
      // Pin the algorithm before looking at any key: `none`, HS256 (public key as HMAC secret) and others are refused.
      if (decoded.header.alg !== 'ES256') {
        return this.refuse('wrong_algorithm', `tickets are ES256; ${decoded.header.alg} is refused`);
      }
      const kid = decoded.header.kid;
      if (!kid) return this.refuse('unknown_key', 'ticket has no kid');
      await this.loadKeys(false);
      if (!this.keys.has(kid)) await this.loadKeys(true);
      const key = this.keys.get(kid);
      if (!key) return this.refuse('unknown_key', `no published key ${kid}`);
      try {
        claims = jwt.verify(token, key, {
          algorithms: ['ES256'],
          audience: this.options.skill,
          issuer: parameters.issuer,
          clockTolerance: this.options.clockToleranceSeconds ?? 5,
        }) as TicketClaims;
      } catch (error) {
        const e = error as Error;
        const reason =
          e.name === 'TokenExpiredError'
            ? 'ticket_expired'
            : /audience/.test(e.message)
              ? 'wrong_audience'
              : 'invalid_ticket';
        return this.refuse(reason, e.message);
      }
      if (this.verified.size >= MAX_VERIFIED) this.verified.clear();
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
