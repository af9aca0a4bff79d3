import { newEventId } from '@paygate/contracts';
import type { PaymentKind } from '@paygate/protocol';
import { SignJWT } from 'jose';
import type { TicketKeyStore } from './keys';

interface IssueTicketInput {
  payer: string;
  skill: string;
  skillId: string;
  sellerId: string;
  method: string;
  path: string;
  kind: PaymentKind;
  txHash: string;
  amount: string;
  /** A subscription's ticket never outlives the subscription. */
  notAfter: Date | null;
}

export class TicketIssuer {
  constructor(
    private readonly keys: TicketKeyStore,
    private readonly issuer: string,
    private readonly ttlSeconds: number,
    private readonly now: () => Date,
  ) {}

  /** The seller middleware checks every claim: `sub` is the payer, `aud` the skill (refused by another skill). */
  async issue({
    payer,
    notAfter,
    ...purchase
  }: IssueTicketInput): Promise<{ ticket: string; expiresAt: Date }> {
    const iat = Math.floor(this.now().getTime() / 1000);
    let exp = iat + this.ttlSeconds;
    if (notAfter) exp = Math.min(exp, Math.floor(notAfter.getTime() / 1000));
    const claims = {
      iss: this.issuer,
      sub: payer,
      aud: purchase.skill,
      jti: newEventId(),
      iat,
      exp,
      ...purchase,
    };
    const { kid, privateKey } = this.keys.signingKey();
    const ticket = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid })
      .sign(privateKey);
    return { ticket, expiresAt: new Date(exp * 1000) };
  }
}
