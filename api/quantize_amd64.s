//go:build amd64 && !purego

#include "textflag.h"

// Three loads of 8 float32 × 3 rows hold 24 values, value e (axis e%3 of
// row e/3) in lane e%8 of load e/8. An axis's 8 values sit in lanes no
// other load uses for it, so two blends gather them into one register
// (x: load 0's lanes 0 3 6, load 1's 1 4 7, load 2's 2 5; y and z alike)
// and one VPERMPS by the lane orders below puts them in row order.
DATA quantLanes<>+0(SB)/4, $0 // x
DATA quantLanes<>+4(SB)/4, $3
DATA quantLanes<>+8(SB)/4, $6
DATA quantLanes<>+12(SB)/4, $1
DATA quantLanes<>+16(SB)/4, $4
DATA quantLanes<>+20(SB)/4, $7
DATA quantLanes<>+24(SB)/4, $2
DATA quantLanes<>+28(SB)/4, $5
DATA quantLanes<>+32(SB)/4, $1 // y
DATA quantLanes<>+36(SB)/4, $4
DATA quantLanes<>+40(SB)/4, $7
DATA quantLanes<>+44(SB)/4, $2
DATA quantLanes<>+48(SB)/4, $5
DATA quantLanes<>+52(SB)/4, $0
DATA quantLanes<>+56(SB)/4, $3
DATA quantLanes<>+60(SB)/4, $6
DATA quantLanes<>+64(SB)/4, $2 // z
DATA quantLanes<>+68(SB)/4, $5
DATA quantLanes<>+72(SB)/4, $0
DATA quantLanes<>+76(SB)/4, $3
DATA quantLanes<>+80(SB)/4, $6
DATA quantLanes<>+84(SB)/4, $1
DATA quantLanes<>+88(SB)/4, $4
DATA quantLanes<>+92(SB)/4, $7
// float32 exponent bits, 8 lanes
DATA quantLanes<>+96(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+104(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+112(SB)/8, $0x7f8000007f800000
DATA quantLanes<>+120(SB)/8, $0x7f8000007f800000
// float64 magnitude bits, 4 lanes
DATA quantLanes<>+128(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+136(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+144(SB)/8, $0x7fffffffffffffff
DATA quantLanes<>+152(SB)/8, $0x7fffffffffffffff
GLOBL quantLanes<>(SB), RODATA|NOPTR, $160

// AXES: Y3, Y4, Y5 = the x, y and z values of the 8 rows at SI.
#define AXES \
	VMOVUPS  (SI), Y0; \
	VMOVUPS  32(SI), Y1; \
	VMOVUPS  64(SI), Y2; \
	VBLENDPS $0x92, Y1, Y0, Y3; \
	VBLENDPS $0x24, Y2, Y3, Y3; \
	VBLENDPS $0x24, Y1, Y0, Y4; \
	VBLENDPS $0x49, Y2, Y4, Y4; \
	VBLENDPS $0x49, Y1, Y0, Y5; \
	VBLENDPS $0x92, Y2, Y5, Y5; \
	VMOVDQU  quantLanes<>+0(SB), Y0; \
	VMOVDQU  quantLanes<>+32(SB), Y1; \
	VMOVDQU  quantLanes<>+64(SB), Y2; \
	VPERMPS  Y3, Y0, Y3; \
	VPERMPS  Y4, Y1, Y4; \
	VPERMPS  Y5, Y2, Y5

// HALF: cellRule.first of the 4 float64 values in V by the rule at
// K(DX) (cellConsts: inv, k0, last, s, off, p, 32 bytes each), the same
// operations in the same order, none fused: t = x*inv - k0 clamped to
// [0, last] and truncated is the cell k; |off + k*s - x| <= p says it
// decodes within p. The cells (int32) go to OUT, each lane's verdict is
// ANDed into Y12.
#define HALF(V, OUT, K) \
	VMULPD      K(DX), V, Y8; \
	VSUBPD      K+32(DX), Y8, Y8; \
	VMAXPD      Y13, Y8, Y8; \
	VMINPD      K+64(DX), Y8, Y8; \
	VROUNDPD    $3, Y8, Y8; \
	VMULPD      K+96(DX), Y8, Y9; \
	VADDPD      K+128(DX), Y9, Y9; \
	VSUBPD      V, Y9, Y9; \
	VANDPD      Y14, Y9, Y9; \
	VCMPPD      $2, K+160(DX), Y9, Y9; \
	VANDPD      Y9, Y12, Y12; \
	VCVTTPD2DQY Y8, OUT

// CELLS: the 8 cells of axis values V (XV its low half) by the rule at
// K(DX), as uint16 in X10.
#define CELLS(V, XV, K) \
	VCVTPS2PD    XV, Y6; \
	VEXTRACTF128 $1, V, X7; \
	VCVTPS2PD    X7, Y7; \
	HALF(Y6, X10, K); \
	HALF(Y7, X11, K); \
	VPACKUSDW    X11, X10, X10

// func cells3AVX2(d, out []byte, stride, w int, k *cellConsts) (done int)
//
// The steps of cells3: 8 rows of d at a time, each axis's cells written
// to its plane of out (axis a at out[a·stride+i·w:], w bytes a cell, 1 or
// 2), until a step with a value whose first try does not decode within p
// (its cells are written, and the caller writes them again). Done: the
// rows of the whole steps that passed.
//
// Registers: SI the step's rows, CX bytes left, DI plane 0 at the step,
// R8 stride, R10 2·stride, R9 w, BX rows done; Y12 the step's verdicts,
// Y13 zero, Y14 the magnitude mask. (Y15 is left alone: Go's internal ABI
// keeps X15 zero.)
TEXT ·cells3AVX2(SB), NOSPLIT, $0-80
	MOVQ d_base+0(FP), SI
	MOVQ d_len+8(FP), CX
	MOVQ out_base+24(FP), DI
	MOVQ stride+48(FP), R8
	MOVQ w+56(FP), R9
	MOVQ k+64(FP), DX
	LEAQ (R8)(R8*1), R10
	XORQ BX, BX
	VXORPD  Y13, Y13, Y13
	VMOVDQU quantLanes<>+128(SB), Y14
	CMPQ R9, $1
	JEQ  bytes

words:
	CMPQ CX, $96
	JB   done
	AXES
	VPCMPEQD Y12, Y12, Y12
	CELLS(Y3, X3, 0)
	VMOVDQU  X10, (DI)
	CELLS(Y4, X4, 192)
	VMOVDQU  X10, (DI)(R8*1)
	CELLS(Y5, X5, 384)
	VMOVDQU  X10, (DI)(R10*1)
	VMOVMSKPD Y12, AX
	CMPL AX, $15
	JNE  done
	ADDQ $96, SI
	SUBQ $96, CX
	ADDQ $16, DI
	ADDQ $8, BX
	JMP  words

bytes:
	CMPQ CX, $96
	JB   done
	AXES
	VPCMPEQD Y12, Y12, Y12
	CELLS(Y3, X3, 0)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)
	CELLS(Y4, X4, 192)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)(R8*1)
	CELLS(Y5, X5, 384)
	VPACKUSWB X10, X10, X10
	VMOVQ     X10, (DI)(R10*1)
	VMOVMSKPD Y12, AX
	CMPL AX, $15
	JNE  done
	ADDQ $96, SI
	SUBQ $96, CX
	ADDQ $8, DI
	ADDQ $8, BX
	JMP  bytes

done:
	VZEROUPPER
	MOVQ BX, done+72(FP)
	RET

// func bounds3AVX2(d []byte, acc *[6][8]float32) (steps int, bad bool)
//
// The steps of bounds3: the lane-wise smallest values of d's whole steps
// of 8 rows (three loads each: lane j of load v is axis (8v+j)%3) into
// acc[0:3], the largest into acc[3:6], and whether any value's exponent
// bits are all set (NaN, ±Inf). Steps: how many.
TEXT ·bounds3AVX2(SB), NOSPLIT, $0-41
	MOVQ d_base+0(FP), SI
	MOVQ d_len+8(FP), CX
	MOVQ acc+24(FP), DI
	XORQ BX, BX
	CMPQ CX, $96
	JB   none
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVAPS Y0, Y3
	VMOVAPS Y1, Y4
	VMOVAPS Y2, Y5
	VMOVAPS Y0, Y6
	VMOVAPS Y1, Y7
	VMOVAPS Y2, Y8
	VPXOR   Y9, Y9, Y9
	VMOVDQU quantLanes<>+96(SB), Y10

step:
	VANDPS   Y10, Y0, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VANDPS   Y10, Y1, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VANDPS   Y10, Y2, Y11
	VPCMPEQD Y10, Y11, Y11
	VPOR     Y11, Y9, Y9
	VMINPS   Y0, Y3, Y3
	VMINPS   Y1, Y4, Y4
	VMINPS   Y2, Y5, Y5
	VMAXPS   Y0, Y6, Y6
	VMAXPS   Y1, Y7, Y7
	VMAXPS   Y2, Y8, Y8
	ADDQ $96, SI
	SUBQ $96, CX
	INCQ BX
	CMPQ CX, $96
	JB   end
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	JMP  step

end:
	VMOVUPS Y3, (DI)
	VMOVUPS Y4, 32(DI)
	VMOVUPS Y5, 64(DI)
	VMOVUPS Y6, 96(DI)
	VMOVUPS Y7, 128(DI)
	VMOVUPS Y8, 160(DI)
	VPTEST  Y9, Y9
	SETNE   bad+40(FP)
	VZEROUPPER
	MOVQ BX, steps+32(FP)
	RET

none:
	MOVQ $0, steps+32(FP)
	MOVB $0, bad+40(FP)
	RET
