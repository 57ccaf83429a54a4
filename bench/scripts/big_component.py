#!/usr/bin/env python3
"""Writes a component of about SIZE bytes (default 64 MiB, the default
[runtime] max_component_bytes) that is all code, to measure what compiling
the largest component Hookbox accepts costs (BENCHMARKS.md, "Compiling the
largest component").

    python3 bench/scripts/big_component.py OUT.wasm [--size BYTES] [--shape many|huge]

shape `many`: functions of about 4 KiB each; `huge`: functions of the largest
size wasmparser accepts (7,654,321 bytes). Every function is a run of
`local.get 0; i32.const 1; i32.add; local.set 0`. The component holds one
core module and nothing else: it compiles, and is then refused for not
exporting `on-event`.
"""
import argparse

MAX_FUNCTION_BYTES = 7_654_321  # wasmparser's MAX_WASM_FUNCTION_SIZE


def leb(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def section(sid, payload):
    return bytes([sid]) + leb(len(payload)) + payload


def body(size):
    step = bytes([0x20, 0x00, 0x41, 0x01, 0x6A, 0x21, 0x00])  # local.get 0; i32.const 1; i32.add; local.set 0
    locals_ = leb(1) + leb(1) + b"\x7f"  # one group: 1 x i32
    n = max(1, (size - len(locals_) - 1) // len(step))
    code = locals_ + step * n + b"\x0b"
    return leb(len(code)) + code


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=64 << 20)
    ap.add_argument("--shape", choices=["many", "huge"], default="many")
    a = ap.parse_args()
    fsize = 4096 if a.shape == "many" else MAX_FUNCTION_BYTES - 16
    one = body(fsize)
    # per function: its body and one byte of type index in the function section
    count = max(1, (a.size - 64) // (len(one) + 1))
    types = section(1, leb(1) + b"\x60\x00\x00")  # one type: [] -> []
    funcs = section(3, leb(count) + leb(0) * count)
    code = section(10, leb(count) + one * count)
    module = b"\0asm\x01\0\0\0" + types + funcs + code
    component = b"\0asm\x0d\0\x01\0" + section(1, module)  # one core module section
    with open(a.out, "wb") as f:
        f.write(component)
    print(f"{a.out}: {len(component)} bytes, {count} functions of {len(one)} bytes")


if __name__ == "__main__":
    main()
