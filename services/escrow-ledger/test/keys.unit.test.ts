import fc from 'fast-check';
import { claimKeyOf } from '../src/claims/statement';
import { transferKey } from '../src/ledger/entries';
import { perInclusion, transferEntryKey } from '../src/payments/transfer-booking';
import { escrowWallets } from '../src/reconciliation/reconcile';

/**
 * The idempotency keys the ledger's effects hang on: one transfer has one key however its hash is spelled, and a
 * transfer mined again after a reorg gets new keys (`#<inclusion>`) while its first inclusion keeps the plain one.
 */

const TX = `0x${'AB'.repeat(32)}`;
const ESCROW = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const CHECKOUT_WALLET = '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955';

describe('transfer keys', () => {
  it('are chainId:txHash:logIndex with the hash in lower case, and the claim of a transfer uses the same', () => {
    expect(transferKey(8453, TX, 3)).toBe(`8453:${TX.toLowerCase()}:3`);
    expect(transferKey(8453, TX.toLowerCase(), 3)).toBe(transferKey(8453, TX, 3));
    const request = {
      chainId: 8453,
      txHash: TX,
      logIndex: 3,
      claimedVia: 'x402' as const,
      reference: `base:${TX.toLowerCase()}`,
      payer: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC',
      amount: '1.5',
    };
    expect(claimKeyOf(request)).toBe(transferKey(8453, TX, 3));
  });

  it('carry the inclusion from the second one on, so a re-included transfer is booked again, never twice', () => {
    expect(perInclusion('k', 0)).toBe('k');
    expect(perInclusion('k', 2)).toBe('k#2');
    expect(transferEntryKey('8453:0xab:1')).toBe('transfer:8453:0xab:1');
    expect(transferEntryKey('8453:0xab:1', 1)).toBe('transfer:8453:0xab:1#1');
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.nat(10_000),
        fc.nat(50),
        fc.nat(50),
        (chainId, logIndex, a, b) => {
          const key = transferKey(chainId, TX, logIndex);
          expect(transferEntryKey(key, a) === transferEntryKey(key, b)).toBe(a === b);
        },
      ),
    );
  });
});

describe("the escrow's wallets", () => {
  it('are the escrow, then the checkout wallet when set and not the same wallet', () => {
    expect(escrowWallets({ escrowAddress: ESCROW, checkoutEscrowAddress: null })).toEqual([ESCROW]);
    expect(escrowWallets({ escrowAddress: ESCROW, checkoutEscrowAddress: CHECKOUT_WALLET })).toEqual([
      ESCROW,
      CHECKOUT_WALLET,
    ]);
    expect(escrowWallets({ escrowAddress: ESCROW, checkoutEscrowAddress: ESCROW.toLowerCase() })).toEqual([
      ESCROW,
    ]);
  });
});
