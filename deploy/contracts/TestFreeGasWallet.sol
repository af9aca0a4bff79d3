// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title TestFreeGasWallet
/// @notice An ERC-1271 wallet that approves its owner's signatures only when the call pays no gas
///         (tx.gasprice == 0): an eth_call or estimateGas without fees says yes, the mined transaction no. The
///         relayer tests use it to see that a simulation runs with the fees the transaction carries.
///         `acceptsPaidGas` (the owner's switch) also approves paid calls, so a test can pass the simulation and
///         turn it off before the block: a revert on chain after a passed simulation.
///         It takes the owner's 65-byte ECDSA signature with v as 27/28, 0/1 (compact) or 31/32 (Safe's eth_sign
///         form, over the "\x19Ethereum Signed Message:\n32" hash): bytes a relayer must pass on unchanged.
///         The owner is in storage, not immutable: every deployment has the same runtime code (one code hash).
contract TestFreeGasWallet {
    address public owner;
    bool public acceptsPaidGas;

    constructor(address walletOwner, bool paidGasToo) {
        owner = walletOwner;
        acceptsPaidGas = paidGasToo;
    }

    function setAcceptsPaidGas(bool value) external {
        require(msg.sender == owner, "not the owner");
        acceptsPaidGas = value;
    }

    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (tx.gasprice != 0 && !acceptsPaidGas) return 0xffffffff;
        if (signature.length != 65) return 0xffffffff;
        bytes32 r;
        bytes32 s;
        uint8 v;
        assembly {
            r := mload(add(signature, 32))
            s := mload(add(signature, 64))
            v := byte(0, mload(add(signature, 96)))
        }
        bytes32 digest = hash;
        if (v == 0 || v == 1) {
            v += 27;
        } else if (v == 31 || v == 32) {
            v -= 4;
            digest = keccak256(abi.encodePacked("\x19Ethereum Signed Message:\n32", hash));
        } else if (v != 27 && v != 28) {
            return 0xffffffff;
        }
        address signer = ecrecover(digest, v, r, s);
        return signer != address(0) && signer == owner ? bytes4(0x1626ba7e) : bytes4(0xffffffff);
    }
}
