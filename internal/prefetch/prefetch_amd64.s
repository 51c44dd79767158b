#include "textflag.h"

// func Line(addr uintptr)
TEXT ·Line(SB), NOSPLIT, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func LineAndRecord(line, rec uintptr)
TEXT ·LineAndRecord(SB), NOSPLIT, $0-16
	MOVQ line+0(FP), AX
	PREFETCHT0 (AX)
	MOVQ rec+8(FP), AX
	TESTQ AX, AX
	JZ done
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
done:
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
