package commands

import (
	"io"
	"net"
	"testing"
	"time"
)

// FuzzDispatch sends arbitrary bytes to an in-process server as one
// client's stream: guard, redcon's parser, dispatch, arity checks and every
// handler the input reaches. Whatever the input, the server must stay up and
// keep serving other connections.
func FuzzDispatch(f *testing.F) {
	for _, seed := range []string{
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
		"SET k v EX 10\r\nINCR k\r\nINCRBYFLOAT k 1e308\r\nGETRANGE k -100 100\r\n",
		"SETRANGE k 536870000 x\r\nAPPEND k x\r\nSETRANGE k -1 x\r\n",
		"MULTI\r\nSET a 1\r\nINCR a\r\nEXEC\r\nWATCH a\r\nMULTI\r\nEXEC\r\n",
		"SCAN 18446744073709551615 COUNT 9223372036854775807\r\nKEYS *\r\nRANDOMKEY\r\n",
		"CLIENT KILL ID 1\r\nCLIENT LIST\r\nCLIENT SETNAME x\r\nHELLO 3\r\nGET k\r\n",
		"COMMAND\r\nCOMMAND DOCS\r\nCOMMAND GETKEYS MSET a\r\nCOMMAND INFO client|list\r\n",
		"CONFIG SET maxclients 1\r\nCONFIG GET *\r\nINFO everything\r\n",
		"*1\r\n$9223372036854775807\r\nabc\r\n", "SELECT 15\r\nSWAPDB 0 15\r\nFLUSHALL\r\n",
		"EXPIRE k -9223372036854775808\r\nPEXPIREAT k 9223372036854775807\r\n",
		"OBJECT ENCODING k\r\nMEMORY USAGE k\r\nDEBUG SLEEP 0\r\nSHUTDOWN\r\n",
		"SADD s 1 2 a\r\nSPOP s 2\r\nSRANDMEMBER s -5\r\nSINTERCARD 2 s t LIMIT 1\r\nSMOVE s t 1\r\nSSCAN s 0 COUNT 1\r\nSUNIONSTORE s s t\r\nSDIFF t s\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		h := newHarness(t)
		var panics []any
		h.srv.Net.OnPanic = func(r any) { panics = append(panics, r) }
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(input)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		if len(panics) > 0 {
			t.Fatalf("a handler panicked: %v", panics)
		}
		// The input may legitimately have set a password or lowered
		// maxclients; the server must still answer.
		h.use("after")
		switch alive := h.do("PING").String(); alive {
		case "+PONG", "-NOAUTH Authentication required.", "-ERR max number of clients reached":
		default:
			t.Fatalf("server not serving after input: %s", alive)
		}
	})
}
