import { Interface, makeError, zeroPadValue } from 'ethers';
import {
  addressOfPrivateKey,
  addressToTopic,
  ChainError,
  decodeTransferLog,
  eip681TransferUri,
  formatAddress,
  getTransferLogs,
  isRangeTooLargeError,
  type LogLike,
  type LogsProvider,
  MalformedLogError,
  networkByChainId,
  networkByName,
  networks,
  rpcUrlForLogs,
  TRANSFER_TOPIC,
  topicToAddress,
  usdcAbi,
  usdcEip712Domain,
} from '../src';

const TOKEN = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const FROM = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const TO = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const usdcInterface = new Interface(usdcAbi);

function transferLog(overrides: Partial<LogLike> & { amountMicro?: bigint; to?: string } = {}): LogLike {
  const encoded = usdcInterface.encodeEventLog('Transfer', [
    FROM,
    overrides.to ?? TO,
    overrides.amountMicro ?? 1_500_000n,
  ]);
  return {
    address: TOKEN.toLowerCase(),
    topics: encoded.topics,
    data: encoded.data,
    transactionHash: `0x${'AB'.repeat(32)}`,
    blockNumber: 10,
    blockHash: `0x${'cd'.repeat(32)}`,
    index: 3,
    ...overrides,
  };
}

describe('networks', () => {
  it('knows base, base-sepolia and local', () => {
    expect(networkByName('base')).toMatchObject({ chainId: 8453, usdcAddress: TOKEN });
    expect(networkByName('base-sepolia')).toMatchObject({
      chainId: 84532,
      usdcAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    });
    expect(networkByName('local')).toMatchObject({ chainId: 31337, usdcAddress: null });
    expect(networkByChainId(84532).name).toBe('base-sepolia');
    expect(networkByChainId(8453n).name).toBe('base');
  });

  it('throws clear errors for unknown networks', () => {
    expect(() => networkByName('mainnet')).toThrow(
      'unknown network "mainnet"; expected one of: base, base-sepolia, local',
    );
    expect(() => networkByName('toString')).toThrow('unknown network');
    expect(() => networkByChainId(1)).toThrow('unknown chainId 1');
    expect(() => networkByChainId(1)).toThrow(RangeError);
  });

  it('has checksummed USDC addresses', () => {
    for (const name of ['base', 'base-sepolia'] as const) {
      const { usdcAddress } = networkByName(name);
      expect(usdcAddress).toBe(formatAddress(usdcAddress!));
    }
  });
});

describe('network presets and the CHAIN_NETWORK switch', () => {
  it('carries what a payment on each network needs: chain id, USDC, its EIP-712 domain, confirmations', () => {
    expect(networkByName('base')).toMatchObject({
      chainId: 8453,
      caip2: 'eip155:8453',
      usdcAddress: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      usdcEip712Name: 'USD Coin',
      usdcEip712Version: '2',
      confirmations: 3,
    });
    expect(networkByName('base-sepolia')).toMatchObject({
      chainId: 84532,
      caip2: 'eip155:84532',
      usdcAddress: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      usdcEip712Name: 'USDC',
      usdcEip712Version: '2',
      confirmations: 3,
    });
    expect(networkByName('local')).toMatchObject({
      chainId: 31337,
      usdcEip712Name: 'USD Coin',
      confirmations: 1,
    });
    for (const network of Object.values(networks)) {
      expect(network.caip2).toBe(`eip155:${network.chainId}`);
      expect(Object.isFrozen(network)).toBe(true);
    }
  });

  it("builds each network's USDC EIP-712 domain from the preset", () => {
    const sepolia = networkByName('base-sepolia');
    expect(
      usdcEip712Domain({
        chainId: sepolia.chainId,
        usdcAddress: sepolia.usdcAddress!,
        eip712Name: sepolia.usdcEip712Name,
        eip712Version: sepolia.usdcEip712Version,
      }),
    ).toEqual({
      name: 'USDC',
      version: '2',
      chainId: 84532,
      verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
    });
  });
});

describe('addresses', () => {
  it('checksums, and round-trips through topics', () => {
    expect(formatAddress(TO.toLowerCase())).toBe(TO);
    expect(() => formatAddress('0x1234')).toThrow('invalid address "0x1234"');
    expect(() => formatAddress('0x1234')).toThrow(TypeError);
    expect(topicToAddress(addressToTopic(TO))).toBe(TO);
    expect(addressToTopic(TO)).toBe(zeroPadValue(TO, 32).toLowerCase());
  });

  it('names a topic that holds no address as a malformed log, a ChainError', () => {
    const topic = `0x${'f'.repeat(64)}`;
    expect(() => topicToAddress(topic)).toThrow(MalformedLogError);
    expect(() => topicToAddress(topic)).toThrow(ChainError);
  });
});

describe('decodeTransferLog', () => {
  it('decodes an ERC-20 Transfer with checksummed addresses and a bigint amount', () => {
    expect(decodeTransferLog(transferLog())).toEqual({
      token: TOKEN,
      from: FROM,
      to: TO,
      amountMicro: 1_500_000n,
      txHash: `0x${'ab'.repeat(32)}`,
      logIndex: 3,
      blockNumber: 10,
      blockHash: `0x${'cd'.repeat(32)}`,
    });
  });

  it('accepts raw JSON-RPC logs (hex logIndex and blockNumber)', () => {
    const { index: _index, ...raw } = transferLog({ blockNumber: '0x1f' });
    const decoded = decodeTransferLog({ ...raw, logIndex: '0x2' });
    expect(decoded).toMatchObject({ blockNumber: 31, logIndex: 2 });
  });

  it('keeps amounts beyond 2^53 exact', () => {
    const amountMicro = 2n ** 200n + 7n;
    expect(decodeTransferLog(transferLog({ amountMicro }))?.amountMicro).toBe(amountMicro);
  });

  it('returns null for other events, ERC-721 transfers and malformed data', () => {
    const approval = usdcInterface.encodeEventLog('Approval', [FROM, TO, 5n]);
    expect(decodeTransferLog(transferLog({ topics: approval.topics, data: approval.data }))).toBeNull();
    const base = transferLog();
    const erc721Topics = [...base.topics, zeroPadValue('0x01', 32)];
    expect(decodeTransferLog({ ...base, topics: erc721Topics, data: '0x' })).toBeNull();
    expect(decodeTransferLog({ ...base, data: '0x' })).toBeNull();
    expect(decodeTransferLog({ ...base, topics: [] })).toBeNull();
    expect(base.topics[0]).toBe(TRANSFER_TOPIC);
  });
});

describe('rpcUrlForLogs', () => {
  it.each([
    ['http://127.0.0.1:8545', 'http://127.0.0.1:8545'],
    ['https://mainnet.base.org/', 'https://mainnet.base.org'],
    ['https://base-mainnet.g.alchemy.com/v2/abcKEY', 'https://base-mainnet.g.alchemy.com/[redacted]'],
    ['https://base-sepolia.infura.io/v3/abcKEY', 'https://base-sepolia.infura.io/[redacted]'],
    ['https://rpc.example/?apikey=abcKEY', 'https://rpc.example/[redacted]'],
    ['https://user:abcKEY@rpc.example', 'https://rpc.example/[redacted]'],
    ['not a url abcKEY', '[an RPC URL that does not parse]'],
  ])('shows %s as %s', (url, shown) => {
    expect(rpcUrlForLogs(url)).toBe(shown);
    expect(rpcUrlForLogs(url)).not.toContain('abcKEY');
  });
});

describe('eip681TransferUri', () => {
  it('builds an ERC-20 transfer URI', () => {
    expect(
      eip681TransferUri({ chainId: 8453, token: TOKEN.toLowerCase(), to: TO, amountMicro: 12_340_000n }),
    ).toBe(`ethereum:${TOKEN}@8453/transfer?address=${TO}&uint256=12340000`);
  });

  it('rejects non-bigint or negative amounts', () => {
    expect(() => eip681TransferUri({ chainId: 8453, token: TOKEN, to: TO, amountMicro: -1n })).toThrow();
    expect(() =>
      eip681TransferUri({ chainId: 8453, token: TOKEN, to: TO, amountMicro: 5 as never }),
    ).toThrow();
  });
});

/** An ethers-shaped RPC error, as JsonRpcProvider.getRpcError would produce. */
function rpcError(code: number, message: string): Error {
  return makeError('could not coalesce error', 'UNKNOWN_ERROR', { error: { code, message } });
}

describe('isRangeTooLargeError', () => {
  it.each([
    [-32005, 'query returned more than 10000 results'],
    [-32600, 'eth_getLogs block range is too large, max 2000 blocks'],
    [-32602, 'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range'],
    [-32000, 'block range too large'],
    [-32005, 'limit exceeded'],
  ])('recognises %d %s', (code, message) => {
    expect(isRangeTooLargeError(rpcError(code, message))).toBe(true);
  });

  it.each([
    rpcError(-32005, 'daily request count exceeded, request rate limit exceeded'),
    rpcError(-32602, 'invalid argument 0: hex string without 0x prefix'),
    new Error('request timeout'),
    undefined,
  ])('does not treat %p as a range error', (error) => {
    expect(isRangeTooLargeError(error)).toBe(false);
  });
});

describe('getTransferLogs chunking', () => {
  /** Serves one Transfer log per block; refuses spans above maxServedBlocks like a real RPC. */
  function fakeProvider(maxServedBlocks: number) {
    const calls: Array<[number, number]> = [];
    const provider: LogsProvider = {
      async getLogs(filter) {
        const from = Number(filter.fromBlock);
        const to = Number(filter.toBlock);
        calls.push([from, to]);
        if (to - from + 1 > maxServedBlocks) throw rpcError(-32005, 'query returned more than 10000 results');
        const logs: LogLike[] = [];
        // Return them out of order to prove sorting.
        for (let block = to; block >= from; block--) {
          logs.push(
            transferLog({ blockNumber: block, index: 1 }),
            transferLog({ blockNumber: block, index: 0 }),
          );
        }
        return logs;
      },
    };
    return { provider, calls };
  }

  it('splits the range into maxRangeBlocks chunks', async () => {
    const { provider, calls } = fakeProvider(1000);
    const transfers = await getTransferLogs(provider, {
      token: TOKEN,
      to: TO,
      fromBlock: 0,
      toBlock: 24,
      maxRangeBlocks: 10,
    });
    expect(calls).toEqual([
      [0, 9],
      [10, 19],
      [20, 24],
    ]);
    expect(transfers).toHaveLength(50);
    expect(transfers.map((t) => [t.blockNumber, t.logIndex]).slice(0, 3)).toEqual([
      [0, 0],
      [0, 1],
      [1, 0],
    ]);
  });

  it('halves the chunk when the provider refuses a range, and keeps the smaller chunk', async () => {
    const { provider, calls } = fakeProvider(3);
    const transfers = await getTransferLogs(provider, {
      token: TOKEN,
      fromBlock: 100,
      toBlock: 111,
      maxRangeBlocks: 16,
    });
    expect(calls).toEqual([
      [100, 111], // 12 blocks: refused
      [100, 105], // 6: refused
      [100, 102], // 3: served
      [103, 105],
      [106, 108],
      [109, 111],
    ]);
    expect(transfers).toHaveLength(24);
    expect(new Set(transfers.map((t) => t.blockNumber)).size).toBe(12);
  });

  it('rethrows when even a single block is refused', async () => {
    const { provider, calls } = fakeProvider(0);
    await expect(
      getTransferLogs(provider, { token: TOKEN, fromBlock: 0, toBlock: 7, maxRangeBlocks: 8 }),
    ).rejects.toThrow('could not coalesce error');
    expect(calls).toEqual([
      [0, 7],
      [0, 3],
      [0, 1],
      [0, 0],
    ]);
  });

  it('rethrows other errors without retrying', async () => {
    let callCount = 0;
    const provider: LogsProvider = {
      async getLogs() {
        callCount++;
        throw new Error('request timeout');
      },
    };
    await expect(
      getTransferLogs(provider, { token: TOKEN, fromBlock: 0, toBlock: 100, maxRangeBlocks: 50 }),
    ).rejects.toThrow('request timeout');
    expect(callCount).toBe(1);
  });

  it('filters on token and recipient topics', async () => {
    const filters: unknown[] = [];
    const provider: LogsProvider = {
      async getLogs(filter) {
        filters.push(filter);
        return [];
      },
    };
    await getTransferLogs(provider, {
      token: TOKEN.toLowerCase(),
      to: TO,
      fromBlock: 5,
      toBlock: 5,
      maxRangeBlocks: 1,
    });
    expect(filters).toEqual([
      { address: TOKEN, topics: [TRANSFER_TOPIC, null, [addressToTopic(TO)]], fromBlock: 5, toBlock: 5 },
    ]);
    expect(
      await getTransferLogs(provider, { token: TOKEN, fromBlock: 6, toBlock: 5, maxRangeBlocks: 1 }),
    ).toEqual([]);
  });
});

describe('addressOfPrivateKey', () => {
  it("is a key's checksummed address, and undefined for anything that is not a key on the curve", () => {
    // anvil's account 0
    expect(addressOfPrivateKey('0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80')).toBe(
      '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266',
    );
    for (const bad of [
      '',
      'ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
      '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff8',
      `0x${'0'.repeat(64)}`,
      `0x${'f'.repeat(64)}`,
    ]) {
      expect(addressOfPrivateKey(bad)).toBeUndefined();
    }
  });
});
