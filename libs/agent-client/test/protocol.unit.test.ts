import { Wallet } from 'ethers';
import {
  decodePaymentHeader,
  encodePaymentHeader,
  PaymentHeaderError,
  paymentMessage,
  pickPaymentHeader,
  recoverPaymentSigner,
  resourceFor,
  signPayment,
} from '../src';

const wallet = new Wallet('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
const txHash = `0x${'ab'.repeat(32)}`;
const proof = {
  txHash,
  amount: '0.05',
  token: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  network: 'base' as const,
  from: wallet.address,
  to: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  signature: '',
};

describe('x402 protocol', () => {
  it('signs and recovers over the tx hash and the resource, and nothing else', async () => {
    const resource = resourceFor('get', 'https://p.example/api/v1/skills/w/data?x=1');
    expect(resource).toBe('GET https://p.example/api/v1/skills/w/data');
    expect(paymentMessage(txHash.toUpperCase().replace('0X', '0x'), resource)).toBe(
      `Paygate payment\ntx: ${txHash}\nresource: ${resource}`,
    );
    const signature = await signPayment(wallet, txHash, resource);
    expect(recoverPaymentSigner(txHash, resource, signature)).toBe(wallet.address);
    expect(recoverPaymentSigner(txHash, 'GET https://p.example/other', signature)).not.toBe(wallet.address);
    expect(recoverPaymentSigner(`0x${'cd'.repeat(32)}`, resource, signature)).not.toBe(wallet.address);
  });

  it('round-trips the header and names the field of every malformed part', async () => {
    const signature = await signPayment(wallet, txHash, 'GET /x');
    const header = encodePaymentHeader({ ...proof, signature });
    expect(decodePaymentHeader(header)).toEqual({ ...proof, signature });
    const broken = (patch: Record<string, unknown>) =>
      Buffer.from(JSON.stringify({ ...proof, signature, ...patch })).toString('base64');
    const fieldOf = (value: string) => {
      try {
        decodePaymentHeader(value);
        return 'none';
      } catch (error) {
        expect(error).toBeInstanceOf(PaymentHeaderError);
        return (error as PaymentHeaderError).field;
      }
    };
    expect(fieldOf('not base64!')).toBe('header');
    expect(fieldOf(Buffer.from('[1]').toString('base64'))).toBe('header');
    expect(fieldOf(broken({ txHash: '0x12' }))).toBe('txHash');
    expect(fieldOf(broken({ amount: '0.0000001' }))).toBe('amount');
    expect(fieldOf(broken({ amount: 5 }))).toBe('amount');
    expect(fieldOf(broken({ network: 'ethereum' }))).toBe('network');
    expect(fieldOf(broken({ to: 'me' }))).toBe('to');
    expect(fieldOf(broken({ signature: '0x00' }))).toBe('signature');
    expect(fieldOf('A'.repeat(5000))).toBe('header');
  });

  it('prefers X-402-Payment, falls back to Payment', () => {
    const both: Record<string, string> = { 'x-402-payment': 'a', payment: 'b' };
    const fallback: Record<string, string> = { payment: 'b' };
    expect(pickPaymentHeader((n) => both[n.toLowerCase()])).toBe('a');
    expect(pickPaymentHeader((n) => fallback[n.toLowerCase()])).toBe('b');
    expect(pickPaymentHeader(() => undefined)).toBeUndefined();
  });
});
