#include "textflag.h"

// func Line(addr uintptr)
TEXT ·Line(SB), NOSPLIT, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func Pointee(at uintptr)
TEXT ·Pointee(SB), NOSPLIT, $0-8
	MOVQ at+0(FP), AX
	TESTQ AX, AX
	JZ none
	MOVQ (AX), AX
	TESTQ AX, AX
	JZ none
	PREFETCHT0 (AX)
none:
	RET

// func LineAndRecordW(line, rec uintptr)
//
// PREFETCHW is not in Go's assembler: 0F 0D /1, encoded by hand —
// 0x0F,0x0D,0x08 is PREFETCHW (AX); 0x0F,0x0D,0x48,0x40 is PREFETCHW 64(AX).
// Every amd64 CPU of AMD's has it, Intel's since Broadwell; the older
// ones run it as a no-op (it never faults).
TEXT ·LineAndRecordW(SB), NOSPLIT, $0-16
	MOVQ line+0(FP), AX
	PREFETCHT0 (AX)
	MOVQ rec+8(FP), AX
	TESTQ AX, AX
	JZ donew
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	BYTE $0x0F; BYTE $0x0D; BYTE $0x48; BYTE $0x40
donew:
	RET
