//go:build amd64 && !purego

#include "textflag.h"

// sameBinAVX2's steps take 8 rows (96 bytes, three YMM loads; lane j of
// load v holds axis (8v+j)%3 of row (8v+j)/3). The bounds' patterns for
// each load are built once a call from lohi by VPERMPS: lo in lanes 0-2,
// hi in lanes 4-6, so load v's lo pattern picks (8v+j)%3 and its hi
// pattern 4+(8v+j)%3.
DATA binLanes<>+0(SB)/4, $0
DATA binLanes<>+4(SB)/4, $1
DATA binLanes<>+8(SB)/4, $2
DATA binLanes<>+12(SB)/4, $0
DATA binLanes<>+16(SB)/4, $1
DATA binLanes<>+20(SB)/4, $2
DATA binLanes<>+24(SB)/4, $0
DATA binLanes<>+28(SB)/4, $1
DATA binLanes<>+32(SB)/4, $2
DATA binLanes<>+36(SB)/4, $0
DATA binLanes<>+40(SB)/4, $1
DATA binLanes<>+44(SB)/4, $2
DATA binLanes<>+48(SB)/4, $0
DATA binLanes<>+52(SB)/4, $1
DATA binLanes<>+56(SB)/4, $2
DATA binLanes<>+60(SB)/4, $0
DATA binLanes<>+64(SB)/4, $1
DATA binLanes<>+68(SB)/4, $2
DATA binLanes<>+72(SB)/4, $0
DATA binLanes<>+76(SB)/4, $1
DATA binLanes<>+80(SB)/4, $2
DATA binLanes<>+84(SB)/4, $0
DATA binLanes<>+88(SB)/4, $1
DATA binLanes<>+92(SB)/4, $2
DATA binLanes<>+96(SB)/4, $4
DATA binLanes<>+100(SB)/4, $4
DATA binLanes<>+104(SB)/4, $4
DATA binLanes<>+108(SB)/4, $4
DATA binLanes<>+112(SB)/4, $4
DATA binLanes<>+116(SB)/4, $4
DATA binLanes<>+120(SB)/4, $4
DATA binLanes<>+124(SB)/4, $4
GLOBL binLanes<>(SB), RODATA|NOPTR, $128

// func sameBinAVX2(data []byte, lohi *[8]float32) (done int)
//
// Registers: SI the step's rows, CX bytes left, DX rows passed; Y3-Y5
// the loads' lo patterns, Y6-Y8 their hi patterns, Y13 lohi. (Y15 is left
// alone, as in the row kernels: Go's internal ABI keeps X15 zero.)
TEXT ·sameBinAVX2(SB), NOSPLIT, $0-40
	MOVQ data_base+0(FP), SI
	MOVQ data_len+8(FP), CX
	MOVQ lohi+24(FP), AX
	VMOVUPS (AX), Y13
	VMOVDQU binLanes<>+96(SB), Y14 // four in every lane: lo's lanes to hi's
	VMOVDQU binLanes<>+0(SB), Y0
	VMOVDQU binLanes<>+32(SB), Y1
	VMOVDQU binLanes<>+64(SB), Y2
	VPERMPS Y13, Y0, Y3 // lo patterns of loads 0, 1, 2
	VPERMPS Y13, Y1, Y4
	VPERMPS Y13, Y2, Y5
	VPADDD  Y14, Y0, Y0
	VPADDD  Y14, Y1, Y1
	VPADDD  Y14, Y2, Y2
	VPERMPS Y13, Y0, Y6 // hi patterns
	VPERMPS Y13, Y1, Y7
	VPERMPS Y13, Y2, Y8
	XORQ    DX, DX

step:
	CMPQ CX, $96
	JB   done
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	// Ordered predicates: a NaN lane is never inside.
	VCMPPS $0x1E, Y3, Y0, Y9   // > lo (GT_OQ)
	VCMPPS $0x11, Y6, Y0, Y10  // < hi (LT_OQ)
	VCMPPS $0x1E, Y4, Y1, Y11
	VCMPPS $0x11, Y7, Y1, Y12
	VANDPS Y9, Y10, Y9
	VANDPS Y11, Y12, Y11
	VCMPPS $0x1E, Y5, Y2, Y10
	VCMPPS $0x11, Y8, Y2, Y12
	VANDPS Y10, Y12, Y10
	VANDPS Y9, Y11, Y12
	VANDPS Y12, Y10, Y12
	VMOVMSKPS Y12, BX
	CMPL BX, $0xFF
	JNE  found
	ADDQ $96, SI
	SUBQ $96, CX
	ADDQ $8, DX
	JMP  step

found:
	// A lane of this step is not inside: the first such lane's row is
	// the answer. The lanes' verdicts as 24 bits, lane j at bit j: the
	// first clear bit b is axis b%3 of row b/3, and b/3 = (11b)>>5 for
	// b < 24.
	VMOVMSKPS Y9, AX
	VMOVMSKPS Y11, BX
	VMOVMSKPS Y10, R8
	SHLL $8, BX
	SHLL $16, R8
	ORL  BX, AX
	ORL  R8, AX
	NOTL AX
	BSFL AX, AX
	IMULL $11, AX
	SHRL $5, AX
	ADDQ AX, DX

done:
	VZEROUPPER
	MOVQ DX, done+32(FP)
	RET
