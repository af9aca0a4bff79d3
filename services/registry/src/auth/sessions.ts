import { jwtVerify, SignJWT } from 'jose';

const ISSUER = 'paygate-registry';
const AUDIENCE = 'paygate-dashboard';
const encoder = new TextEncoder();

/**
 * Dashboard session tokens: short-lived HS256 JWTs naming the seller. `issuedAtMs` (iat in milliseconds) tells a
 * session issued just after a sign-out from one issued before it within the same second.
 */
export async function issueSessionToken(sellerId: string, secret: string, now: Date, ttlMs: number) {
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + Math.floor(ttlMs / 1000);
  const token = await new SignJWT({ typ: 'session', issuedAtMs: now.getTime() })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .setSubject(sellerId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .sign(encoder.encode(secret));
  return { token, expiresAt: new Date(exp * 1000) };
}

/** The seller and issue time of a valid session token, or undefined. */
export async function verifySessionToken(token: string, secret: string, now: Date) {
  try {
    const { payload } = await jwtVerify(token, encoder.encode(secret), {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      currentDate: now,
    });
    if (payload.typ !== 'session' || typeof payload.sub !== 'string') return undefined;
    const issuedAtMs =
      typeof payload.issuedAtMs === 'number' ? payload.issuedAtMs : (payload.iat ?? 0) * 1000;
    return { sellerId: payload.sub, issuedAtMs };
  } catch {
    return undefined;
  }
}
