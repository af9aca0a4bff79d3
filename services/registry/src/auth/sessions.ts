import { jwtVerify, SignJWT } from 'jose';

const ISSUER = 'paygate-registry';
const AUDIENCE = 'paygate-dashboard';
const encoder = new TextEncoder();

/** Dashboard session tokens: short-lived HS256 JWTs naming the seller. */
export async function issueSessionToken(sellerId: string, secret: string, now: Date, ttlMs: number) {
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + Math.floor(ttlMs / 1000);
  const token = await new SignJWT({ typ: 'session' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt(iat)
    .setExpirationTime(exp)
    .setSubject(sellerId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .sign(encoder.encode(secret));
  return { token, expiresAt: new Date(exp * 1000) };
}

/** The seller id of a valid session token, or undefined. */
export async function verifySessionToken(
  token: string,
  secret: string,
  now: Date,
): Promise<string | undefined> {
  try {
    const { payload } = await jwtVerify(token, encoder.encode(secret), {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      currentDate: now,
    });
    if (payload.typ !== 'session' || typeof payload.sub !== 'string') return undefined;
    return payload.sub;
  } catch {
    return undefined;
  }
}
