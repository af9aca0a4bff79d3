import jwt from 'jsonwebtoken';

const ISSUER = 'paygate-registry';
const AUDIENCE = 'paygate-dashboard';

/** Dashboard session tokens: short-lived HS256 JWTs naming the seller. */
export function issueSessionToken(sellerId: string, secret: string, now: Date, ttlMs: number) {
  const iat = Math.floor(now.getTime() / 1000);
  const exp = iat + Math.floor(ttlMs / 1000);
  const token = jwt.sign({ typ: 'session', iat, exp }, secret, {
    algorithm: 'HS256',
    subject: sellerId,
    issuer: ISSUER,
    audience: AUDIENCE,
  });
  return { token, expiresAt: new Date(exp * 1000) };
}

/** The seller id of a valid session token, or undefined. */
export function verifySessionToken(token: string, secret: string, now: Date): string | undefined {
  try {
    const claims = jwt.verify(token, secret, {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      clockTimestamp: Math.floor(now.getTime() / 1000),
    });
    if (typeof claims !== 'object' || claims.typ !== 'session' || typeof claims.sub !== 'string')
      return undefined;
    return claims.sub;
  } catch {
    return undefined;
  }
}
