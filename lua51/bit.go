package lua51

import (
	"math"
	"math/bits"

	lua "github.com/yuin/gopher-lua"
)

// The bit library of Redis's Lua (LuaBitOp): 32-bit operations on numbers,
// results as signed 32-bit integers.

// bitArg converts argument n as LuaBitOp does: adding 2^52+2^51 rounds the
// number to an integer in the low 32 bits of the double's mantissa.
func bitArg(L *lua.LState, n int, fn string) uint32 {
	f := luaCheckNumber(L, n, fn)
	return uint32(math.Float64bits(f + 6755399441055744.0))
}

func bitLibrary(L *lua.LState) *lua.LTable {
	push := func(L *lua.LState, b uint32) int {
		L.Push(lua.LNumber(int32(b)))
		return 1
	}
	fold := func(name string, op func(a, b uint32) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1, name)
			for i := 2; i <= L.GetTop(); i++ {
				b = op(b, bitArg(L, i, name))
			}
			return push(L, b)
		}
	}
	shift := func(name string, op func(b uint32, n uint) uint32) lua.LGFunction {
		return func(L *lua.LState) int {
			b := bitArg(L, 1, name)
			n := uint(bitArg(L, 2, name) & 31)
			return push(L, op(b, n))
		}
	}
	fns := map[string]lua.LGFunction{
		"tobit":  func(L *lua.LState) int { return push(L, bitArg(L, 1, "tobit")) },
		"bnot":   func(L *lua.LState) int { return push(L, ^bitArg(L, 1, "bnot")) },
		"band":   fold("band", func(a, b uint32) uint32 { return a & b }),
		"bor":    fold("bor", func(a, b uint32) uint32 { return a | b }),
		"bxor":   fold("bxor", func(a, b uint32) uint32 { return a ^ b }),
		"lshift": shift("lshift", func(b uint32, n uint) uint32 { return b << n }),
		"rshift": shift("rshift", func(b uint32, n uint) uint32 { return b >> n }),
		"arshift": shift("arshift", func(b uint32, n uint) uint32 {
			return uint32(int32(b) >> n)
		}),
		"rol":   shift("rol", func(b uint32, n uint) uint32 { return bits.RotateLeft32(b, int(n)) }),
		"ror":   shift("ror", func(b uint32, n uint) uint32 { return bits.RotateLeft32(b, -int(n)) }),
		"bswap": func(L *lua.LState) int { return push(L, bits.ReverseBytes32(bitArg(L, 1, "bswap"))) },
		"tohex": func(L *lua.LState) int {
			b := bitArg(L, 1, "tohex")
			n := int32(8)
			if L.GetTop() >= 2 {
				n = int32(bitArg(L, 2, "tohex"))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n, digits = -n, "0123456789ABCDEF"
			}
			n = max(min(n, 8), 0) // -(-2^31) stays negative
			var buf [8]byte
			for i := n - 1; i >= 0; i-- {
				buf[i] = digits[b&15]
				b >>= 4
			}
			L.Push(lua.LString(buf[:n]))
			return 1
		},
	}
	t := L.NewTable()
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	return t
}
