import { newEventId } from '@paygate/contracts';
import type { PaymentKind } from '@paygate/protocol';
import { SignJWT } from 'jose';
import type { TicketKeyStore } from './keys';

interface TicketPurchase {
  skill: string;
  skillId: string;
  sellerId: string;
  method: string;
  path: string;
  kind: PaymentKind;
  txHash: string;
  amount: string;
}

/** The claims of a Paygate ticket; the seller middleware checks every one of them. */
interface TicketClaims extends TicketPurchase {
  iss: string;
  sub: string;
  /** The skill name: a ticket for one skill is refused by another. */
  aud: string;
  jti: string;
  iat: number;
  exp: number;
}

interface IssueTicketInput extends TicketPurchase {
  payer: string;
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

  async issue(input: IssueTicketInput): Promise<{ ticket: string; expiresAt: Date; jti: string }> {
    const iat = Math.floor(this.now().getTime() / 1000);
    let exp = iat + this.ttlSeconds;
    if (input.notAfter) exp = Math.min(exp, Math.floor(input.notAfter.getTime() / 1000));
    const jti = newEventId();
    const { payer, notAfter: _notAfter, ...purchase } = input;
    const claims: TicketClaims = {
      iss: this.issuer,
      sub: payer,
      aud: input.skill,
      jti,
      iat,
      exp,
      ...purchase,
    };
    const { kid, privateKey } = this.keys.signingKey();
    const ticket = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid })
      .sign(privateKey);
    return { ticket, expiresAt: new Date(exp * 1000), jti };
  }
}
