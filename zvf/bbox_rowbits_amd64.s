//go:build amd64 && !purego

#include "textflag.h"

// The row kernels' steps of 8 rows in AVX2 (bbox_rowbits_amd64.go). A step
// takes 96 bytes, three YMM loads of 8 lanes, lane j holding axis j%3 of
// row j/3. Each lane is tested as rowBits' runs: d = x-l (of x's key
// when keyed), inside when d <= w unsigned, found as min(d, w) == d
// (AVX2 has no unsigned compare). The lanes' verdicts become a 24-bit
// mask (VMOVMSKPS); row i is inside when its bits 3i, 3i+1, 3i+2 are
// all set: t = m & m>>1 & m>>2 has row i's verdict at bit 3i, and 7t
// sets all three lanes of each row inside (the bits lie 3 apart: no
// carries). A step wholly inside is stored at once, one wholly outside
// skipped. Otherwise each vector's kept lanes are packed to its start
// (VPERMD by keptLanes<> of its 8 bits of 7t) and stored whole, the
// end advancing by 4 bytes a kept lane (POPCNT); the numbers likewise,
// by the row mask (t's bits 3i gathered to bits i by shifts: no PEXT,
// which is slow on AMD Zen 1/2). A vector's store covers 32 bytes of
// which only the kept lanes count: it stays inside the step's 96 bytes
// of room (dst has src's length, nums its rows), and the next store or
// the caller overwrites the rest.
//
// Registers: SI src, CX bytes of src left, DI dst's end, DX nums' end,
// R8 keyed, R13 keptLanes<>; Y3-Y5 the runs' first patterns per lane,
// Y6-Y8 their widths; Y13 the step's row numbers, Y14 eight of 8.

// iota<> is the row numbers of a step's lanes from its first.
DATA iota<>+0(SB)/4, $0
DATA iota<>+4(SB)/4, $1
DATA iota<>+8(SB)/4, $2
DATA iota<>+12(SB)/4, $3
DATA iota<>+16(SB)/4, $4
DATA iota<>+20(SB)/4, $5
DATA iota<>+24(SB)/4, $6
DATA iota<>+28(SB)/4, $7
GLOBL iota<>(SB), RODATA|NOPTR, $32

// keptLanes<> is, for each 8-bit lane mask m, the numbers of m's set
// lanes in ascending order, a byte each, then zeros: VPERMD by them
// (widened by VPMOVZXBD) packs a vector's kept lanes at its start.
DATA keptLanes<>+0(SB)/8, $0x0000000000000000
DATA keptLanes<>+8(SB)/8, $0x0000000000000000
DATA keptLanes<>+16(SB)/8, $0x0000000000000001
DATA keptLanes<>+24(SB)/8, $0x0000000000000100
DATA keptLanes<>+32(SB)/8, $0x0000000000000002
DATA keptLanes<>+40(SB)/8, $0x0000000000000200
DATA keptLanes<>+48(SB)/8, $0x0000000000000201
DATA keptLanes<>+56(SB)/8, $0x0000000000020100
DATA keptLanes<>+64(SB)/8, $0x0000000000000003
DATA keptLanes<>+72(SB)/8, $0x0000000000000300
DATA keptLanes<>+80(SB)/8, $0x0000000000000301
DATA keptLanes<>+88(SB)/8, $0x0000000000030100
DATA keptLanes<>+96(SB)/8, $0x0000000000000302
DATA keptLanes<>+104(SB)/8, $0x0000000000030200
DATA keptLanes<>+112(SB)/8, $0x0000000000030201
DATA keptLanes<>+120(SB)/8, $0x0000000003020100
DATA keptLanes<>+128(SB)/8, $0x0000000000000004
DATA keptLanes<>+136(SB)/8, $0x0000000000000400
DATA keptLanes<>+144(SB)/8, $0x0000000000000401
DATA keptLanes<>+152(SB)/8, $0x0000000000040100
DATA keptLanes<>+160(SB)/8, $0x0000000000000402
DATA keptLanes<>+168(SB)/8, $0x0000000000040200
DATA keptLanes<>+176(SB)/8, $0x0000000000040201
DATA keptLanes<>+184(SB)/8, $0x0000000004020100
DATA keptLanes<>+192(SB)/8, $0x0000000000000403
DATA keptLanes<>+200(SB)/8, $0x0000000000040300
DATA keptLanes<>+208(SB)/8, $0x0000000000040301
DATA keptLanes<>+216(SB)/8, $0x0000000004030100
DATA keptLanes<>+224(SB)/8, $0x0000000000040302
DATA keptLanes<>+232(SB)/8, $0x0000000004030200
DATA keptLanes<>+240(SB)/8, $0x0000000004030201
DATA keptLanes<>+248(SB)/8, $0x0000000403020100
DATA keptLanes<>+256(SB)/8, $0x0000000000000005
DATA keptLanes<>+264(SB)/8, $0x0000000000000500
DATA keptLanes<>+272(SB)/8, $0x0000000000000501
DATA keptLanes<>+280(SB)/8, $0x0000000000050100
DATA keptLanes<>+288(SB)/8, $0x0000000000000502
DATA keptLanes<>+296(SB)/8, $0x0000000000050200
DATA keptLanes<>+304(SB)/8, $0x0000000000050201
DATA keptLanes<>+312(SB)/8, $0x0000000005020100
DATA keptLanes<>+320(SB)/8, $0x0000000000000503
DATA keptLanes<>+328(SB)/8, $0x0000000000050300
DATA keptLanes<>+336(SB)/8, $0x0000000000050301
DATA keptLanes<>+344(SB)/8, $0x0000000005030100
DATA keptLanes<>+352(SB)/8, $0x0000000000050302
DATA keptLanes<>+360(SB)/8, $0x0000000005030200
DATA keptLanes<>+368(SB)/8, $0x0000000005030201
DATA keptLanes<>+376(SB)/8, $0x0000000503020100
DATA keptLanes<>+384(SB)/8, $0x0000000000000504
DATA keptLanes<>+392(SB)/8, $0x0000000000050400
DATA keptLanes<>+400(SB)/8, $0x0000000000050401
DATA keptLanes<>+408(SB)/8, $0x0000000005040100
DATA keptLanes<>+416(SB)/8, $0x0000000000050402
DATA keptLanes<>+424(SB)/8, $0x0000000005040200
DATA keptLanes<>+432(SB)/8, $0x0000000005040201
DATA keptLanes<>+440(SB)/8, $0x0000000504020100
DATA keptLanes<>+448(SB)/8, $0x0000000000050403
DATA keptLanes<>+456(SB)/8, $0x0000000005040300
DATA keptLanes<>+464(SB)/8, $0x0000000005040301
DATA keptLanes<>+472(SB)/8, $0x0000000504030100
DATA keptLanes<>+480(SB)/8, $0x0000000005040302
DATA keptLanes<>+488(SB)/8, $0x0000000504030200
DATA keptLanes<>+496(SB)/8, $0x0000000504030201
DATA keptLanes<>+504(SB)/8, $0x0000050403020100
DATA keptLanes<>+512(SB)/8, $0x0000000000000006
DATA keptLanes<>+520(SB)/8, $0x0000000000000600
DATA keptLanes<>+528(SB)/8, $0x0000000000000601
DATA keptLanes<>+536(SB)/8, $0x0000000000060100
DATA keptLanes<>+544(SB)/8, $0x0000000000000602
DATA keptLanes<>+552(SB)/8, $0x0000000000060200
DATA keptLanes<>+560(SB)/8, $0x0000000000060201
DATA keptLanes<>+568(SB)/8, $0x0000000006020100
DATA keptLanes<>+576(SB)/8, $0x0000000000000603
DATA keptLanes<>+584(SB)/8, $0x0000000000060300
DATA keptLanes<>+592(SB)/8, $0x0000000000060301
DATA keptLanes<>+600(SB)/8, $0x0000000006030100
DATA keptLanes<>+608(SB)/8, $0x0000000000060302
DATA keptLanes<>+616(SB)/8, $0x0000000006030200
DATA keptLanes<>+624(SB)/8, $0x0000000006030201
DATA keptLanes<>+632(SB)/8, $0x0000000603020100
DATA keptLanes<>+640(SB)/8, $0x0000000000000604
DATA keptLanes<>+648(SB)/8, $0x0000000000060400
DATA keptLanes<>+656(SB)/8, $0x0000000000060401
DATA keptLanes<>+664(SB)/8, $0x0000000006040100
DATA keptLanes<>+672(SB)/8, $0x0000000000060402
DATA keptLanes<>+680(SB)/8, $0x0000000006040200
DATA keptLanes<>+688(SB)/8, $0x0000000006040201
DATA keptLanes<>+696(SB)/8, $0x0000000604020100
DATA keptLanes<>+704(SB)/8, $0x0000000000060403
DATA keptLanes<>+712(SB)/8, $0x0000000006040300
DATA keptLanes<>+720(SB)/8, $0x0000000006040301
DATA keptLanes<>+728(SB)/8, $0x0000000604030100
DATA keptLanes<>+736(SB)/8, $0x0000000006040302
DATA keptLanes<>+744(SB)/8, $0x0000000604030200
DATA keptLanes<>+752(SB)/8, $0x0000000604030201
DATA keptLanes<>+760(SB)/8, $0x0000060403020100
DATA keptLanes<>+768(SB)/8, $0x0000000000000605
DATA keptLanes<>+776(SB)/8, $0x0000000000060500
DATA keptLanes<>+784(SB)/8, $0x0000000000060501
DATA keptLanes<>+792(SB)/8, $0x0000000006050100
DATA keptLanes<>+800(SB)/8, $0x0000000000060502
DATA keptLanes<>+808(SB)/8, $0x0000000006050200
DATA keptLanes<>+816(SB)/8, $0x0000000006050201
DATA keptLanes<>+824(SB)/8, $0x0000000605020100
DATA keptLanes<>+832(SB)/8, $0x0000000000060503
DATA keptLanes<>+840(SB)/8, $0x0000000006050300
DATA keptLanes<>+848(SB)/8, $0x0000000006050301
DATA keptLanes<>+856(SB)/8, $0x0000000605030100
DATA keptLanes<>+864(SB)/8, $0x0000000006050302
DATA keptLanes<>+872(SB)/8, $0x0000000605030200
DATA keptLanes<>+880(SB)/8, $0x0000000605030201
DATA keptLanes<>+888(SB)/8, $0x0000060503020100
DATA keptLanes<>+896(SB)/8, $0x0000000000060504
DATA keptLanes<>+904(SB)/8, $0x0000000006050400
DATA keptLanes<>+912(SB)/8, $0x0000000006050401
DATA keptLanes<>+920(SB)/8, $0x0000000605040100
DATA keptLanes<>+928(SB)/8, $0x0000000006050402
DATA keptLanes<>+936(SB)/8, $0x0000000605040200
DATA keptLanes<>+944(SB)/8, $0x0000000605040201
DATA keptLanes<>+952(SB)/8, $0x0000060504020100
DATA keptLanes<>+960(SB)/8, $0x0000000006050403
DATA keptLanes<>+968(SB)/8, $0x0000000605040300
DATA keptLanes<>+976(SB)/8, $0x0000000605040301
DATA keptLanes<>+984(SB)/8, $0x0000060504030100
DATA keptLanes<>+992(SB)/8, $0x0000000605040302
DATA keptLanes<>+1000(SB)/8, $0x0000060504030200
DATA keptLanes<>+1008(SB)/8, $0x0000060504030201
DATA keptLanes<>+1016(SB)/8, $0x0006050403020100
DATA keptLanes<>+1024(SB)/8, $0x0000000000000007
DATA keptLanes<>+1032(SB)/8, $0x0000000000000700
DATA keptLanes<>+1040(SB)/8, $0x0000000000000701
DATA keptLanes<>+1048(SB)/8, $0x0000000000070100
DATA keptLanes<>+1056(SB)/8, $0x0000000000000702
DATA keptLanes<>+1064(SB)/8, $0x0000000000070200
DATA keptLanes<>+1072(SB)/8, $0x0000000000070201
DATA keptLanes<>+1080(SB)/8, $0x0000000007020100
DATA keptLanes<>+1088(SB)/8, $0x0000000000000703
DATA keptLanes<>+1096(SB)/8, $0x0000000000070300
DATA keptLanes<>+1104(SB)/8, $0x0000000000070301
DATA keptLanes<>+1112(SB)/8, $0x0000000007030100
DATA keptLanes<>+1120(SB)/8, $0x0000000000070302
DATA keptLanes<>+1128(SB)/8, $0x0000000007030200
DATA keptLanes<>+1136(SB)/8, $0x0000000007030201
DATA keptLanes<>+1144(SB)/8, $0x0000000703020100
DATA keptLanes<>+1152(SB)/8, $0x0000000000000704
DATA keptLanes<>+1160(SB)/8, $0x0000000000070400
DATA keptLanes<>+1168(SB)/8, $0x0000000000070401
DATA keptLanes<>+1176(SB)/8, $0x0000000007040100
DATA keptLanes<>+1184(SB)/8, $0x0000000000070402
DATA keptLanes<>+1192(SB)/8, $0x0000000007040200
DATA keptLanes<>+1200(SB)/8, $0x0000000007040201
DATA keptLanes<>+1208(SB)/8, $0x0000000704020100
DATA keptLanes<>+1216(SB)/8, $0x0000000000070403
DATA keptLanes<>+1224(SB)/8, $0x0000000007040300
DATA keptLanes<>+1232(SB)/8, $0x0000000007040301
DATA keptLanes<>+1240(SB)/8, $0x0000000704030100
DATA keptLanes<>+1248(SB)/8, $0x0000000007040302
DATA keptLanes<>+1256(SB)/8, $0x0000000704030200
DATA keptLanes<>+1264(SB)/8, $0x0000000704030201
DATA keptLanes<>+1272(SB)/8, $0x0000070403020100
DATA keptLanes<>+1280(SB)/8, $0x0000000000000705
DATA keptLanes<>+1288(SB)/8, $0x0000000000070500
DATA keptLanes<>+1296(SB)/8, $0x0000000000070501
DATA keptLanes<>+1304(SB)/8, $0x0000000007050100
DATA keptLanes<>+1312(SB)/8, $0x0000000000070502
DATA keptLanes<>+1320(SB)/8, $0x0000000007050200
DATA keptLanes<>+1328(SB)/8, $0x0000000007050201
DATA keptLanes<>+1336(SB)/8, $0x0000000705020100
DATA keptLanes<>+1344(SB)/8, $0x0000000000070503
DATA keptLanes<>+1352(SB)/8, $0x0000000007050300
DATA keptLanes<>+1360(SB)/8, $0x0000000007050301
DATA keptLanes<>+1368(SB)/8, $0x0000000705030100
DATA keptLanes<>+1376(SB)/8, $0x0000000007050302
DATA keptLanes<>+1384(SB)/8, $0x0000000705030200
DATA keptLanes<>+1392(SB)/8, $0x0000000705030201
DATA keptLanes<>+1400(SB)/8, $0x0000070503020100
DATA keptLanes<>+1408(SB)/8, $0x0000000000070504
DATA keptLanes<>+1416(SB)/8, $0x0000000007050400
DATA keptLanes<>+1424(SB)/8, $0x0000000007050401
DATA keptLanes<>+1432(SB)/8, $0x0000000705040100
DATA keptLanes<>+1440(SB)/8, $0x0000000007050402
DATA keptLanes<>+1448(SB)/8, $0x0000000705040200
DATA keptLanes<>+1456(SB)/8, $0x0000000705040201
DATA keptLanes<>+1464(SB)/8, $0x0000070504020100
DATA keptLanes<>+1472(SB)/8, $0x0000000007050403
DATA keptLanes<>+1480(SB)/8, $0x0000000705040300
DATA keptLanes<>+1488(SB)/8, $0x0000000705040301
DATA keptLanes<>+1496(SB)/8, $0x0000070504030100
DATA keptLanes<>+1504(SB)/8, $0x0000000705040302
DATA keptLanes<>+1512(SB)/8, $0x0000070504030200
DATA keptLanes<>+1520(SB)/8, $0x0000070504030201
DATA keptLanes<>+1528(SB)/8, $0x0007050403020100
DATA keptLanes<>+1536(SB)/8, $0x0000000000000706
DATA keptLanes<>+1544(SB)/8, $0x0000000000070600
DATA keptLanes<>+1552(SB)/8, $0x0000000000070601
DATA keptLanes<>+1560(SB)/8, $0x0000000007060100
DATA keptLanes<>+1568(SB)/8, $0x0000000000070602
DATA keptLanes<>+1576(SB)/8, $0x0000000007060200
DATA keptLanes<>+1584(SB)/8, $0x0000000007060201
DATA keptLanes<>+1592(SB)/8, $0x0000000706020100
DATA keptLanes<>+1600(SB)/8, $0x0000000000070603
DATA keptLanes<>+1608(SB)/8, $0x0000000007060300
DATA keptLanes<>+1616(SB)/8, $0x0000000007060301
DATA keptLanes<>+1624(SB)/8, $0x0000000706030100
DATA keptLanes<>+1632(SB)/8, $0x0000000007060302
DATA keptLanes<>+1640(SB)/8, $0x0000000706030200
DATA keptLanes<>+1648(SB)/8, $0x0000000706030201
DATA keptLanes<>+1656(SB)/8, $0x0000070603020100
DATA keptLanes<>+1664(SB)/8, $0x0000000000070604
DATA keptLanes<>+1672(SB)/8, $0x0000000007060400
DATA keptLanes<>+1680(SB)/8, $0x0000000007060401
DATA keptLanes<>+1688(SB)/8, $0x0000000706040100
DATA keptLanes<>+1696(SB)/8, $0x0000000007060402
DATA keptLanes<>+1704(SB)/8, $0x0000000706040200
DATA keptLanes<>+1712(SB)/8, $0x0000000706040201
DATA keptLanes<>+1720(SB)/8, $0x0000070604020100
DATA keptLanes<>+1728(SB)/8, $0x0000000007060403
DATA keptLanes<>+1736(SB)/8, $0x0000000706040300
DATA keptLanes<>+1744(SB)/8, $0x0000000706040301
DATA keptLanes<>+1752(SB)/8, $0x0000070604030100
DATA keptLanes<>+1760(SB)/8, $0x0000000706040302
DATA keptLanes<>+1768(SB)/8, $0x0000070604030200
DATA keptLanes<>+1776(SB)/8, $0x0000070604030201
DATA keptLanes<>+1784(SB)/8, $0x0007060403020100
DATA keptLanes<>+1792(SB)/8, $0x0000000000070605
DATA keptLanes<>+1800(SB)/8, $0x0000000007060500
DATA keptLanes<>+1808(SB)/8, $0x0000000007060501
DATA keptLanes<>+1816(SB)/8, $0x0000000706050100
DATA keptLanes<>+1824(SB)/8, $0x0000000007060502
DATA keptLanes<>+1832(SB)/8, $0x0000000706050200
DATA keptLanes<>+1840(SB)/8, $0x0000000706050201
DATA keptLanes<>+1848(SB)/8, $0x0000070605020100
DATA keptLanes<>+1856(SB)/8, $0x0000000007060503
DATA keptLanes<>+1864(SB)/8, $0x0000000706050300
DATA keptLanes<>+1872(SB)/8, $0x0000000706050301
DATA keptLanes<>+1880(SB)/8, $0x0000070605030100
DATA keptLanes<>+1888(SB)/8, $0x0000000706050302
DATA keptLanes<>+1896(SB)/8, $0x0000070605030200
DATA keptLanes<>+1904(SB)/8, $0x0000070605030201
DATA keptLanes<>+1912(SB)/8, $0x0007060503020100
DATA keptLanes<>+1920(SB)/8, $0x0000000007060504
DATA keptLanes<>+1928(SB)/8, $0x0000000706050400
DATA keptLanes<>+1936(SB)/8, $0x0000000706050401
DATA keptLanes<>+1944(SB)/8, $0x0000070605040100
DATA keptLanes<>+1952(SB)/8, $0x0000000706050402
DATA keptLanes<>+1960(SB)/8, $0x0000070605040200
DATA keptLanes<>+1968(SB)/8, $0x0000070605040201
DATA keptLanes<>+1976(SB)/8, $0x0007060504020100
DATA keptLanes<>+1984(SB)/8, $0x0000000706050403
DATA keptLanes<>+1992(SB)/8, $0x0000070605040300
DATA keptLanes<>+2000(SB)/8, $0x0000070605040301
DATA keptLanes<>+2008(SB)/8, $0x0007060504030100
DATA keptLanes<>+2016(SB)/8, $0x0000070605040302
DATA keptLanes<>+2024(SB)/8, $0x0007060504030200
DATA keptLanes<>+2032(SB)/8, $0x0007060504030201
DATA keptLanes<>+2040(SB)/8, $0x0706050403020100
GLOBL keptLanes<>(SB), RODATA|NOPTR, $2048

// LANES spreads the runs at R (bitRuns: l at 16i, w+1 at 16i+8) over
// the lanes: the three vectors' axes are x y z x y z x y, z x y z x y z
// x, y z x y z x y z; the blend masks pick the y and z lanes. A width
// is w+1's low 32 bits less one (2^32, every pattern, gives 2^32-1).
#define LANES(R) \
	VPBROADCASTD 0(R), Y9; \
	VPBROADCASTD 16(R), Y10; \
	VPBROADCASTD 32(R), Y11; \
	VPBLENDD $0x92, Y10, Y9, Y3; \
	VPBLENDD $0x24, Y11, Y3, Y3; \
	VPBLENDD $0x24, Y10, Y9, Y4; \
	VPBLENDD $0x49, Y11, Y4, Y4; \
	VPBLENDD $0x49, Y10, Y9, Y5; \
	VPBLENDD $0x92, Y11, Y5, Y5; \
	VPCMPEQD Y12, Y12, Y12; \
	VPBROADCASTD 8(R), Y9; \
	VPBROADCASTD 24(R), Y10; \
	VPBROADCASTD 40(R), Y11; \
	VPADDD Y12, Y9, Y9; \
	VPADDD Y12, Y10, Y10; \
	VPADDD Y12, Y11, Y11; \
	VPBLENDD $0x92, Y10, Y9, Y6; \
	VPBLENDD $0x24, Y11, Y6, Y6; \
	VPBLENDD $0x24, Y10, Y9, Y7; \
	VPBLENDD $0x49, Y11, Y7, Y7; \
	VPBLENDD $0x49, Y10, Y9, Y8; \
	VPBLENDD $0x92, Y11, Y8, Y8

// SUBPLAIN: d = x - l per lane, into Y9-Y11 (bits).
#define SUBPLAIN \
	VPSUBD Y3, Y0, Y9; \
	VPSUBD Y4, Y1, Y10; \
	VPSUBD Y5, Y2, Y11

// SUBKEYED: d = key(x) - l per lane, key(x) = x ^ (x>>31 arithmetic)>>1
// logical (rowKey).
#define SUBKEYED \
	VPSRAD $31, Y0, Y9; \
	VPSRAD $31, Y1, Y10; \
	VPSRAD $31, Y2, Y11; \
	VPSRLD $1, Y9, Y9; \
	VPSRLD $1, Y10, Y10; \
	VPSRLD $1, Y11, Y11; \
	VPXOR Y0, Y9, Y9; \
	VPXOR Y1, Y10, Y10; \
	VPXOR Y2, Y11, Y11; \
	VPSUBD Y3, Y9, Y9; \
	VPSUBD Y4, Y10, Y10; \
	VPSUBD Y5, Y11, Y11

// MASK: AX = the step's rows' verdicts, row i's at bit 3i (only there).
#define MASK \
	VPMINUD Y6, Y9, Y12; \
	VPCMPEQD Y12, Y9, Y9; \
	VPMINUD Y7, Y10, Y12; \
	VPCMPEQD Y12, Y10, Y10; \
	VPMINUD Y8, Y11, Y12; \
	VPCMPEQD Y12, Y11, Y11; \
	VMOVMSKPS Y9, AX; \
	VMOVMSKPS Y10, BX; \
	VMOVMSKPS Y11, R12; \
	SHLL $8, BX; \
	SHLL $16, R12; \
	ORL BX, AX; \
	ORL R12, AX; \
	MOVL AX, BX; \
	SHRL $1, BX; \
	MOVL AX, R12; \
	SHRL $2, R12; \
	ANDL BX, AX; \
	ANDL R12, AX; \
	ANDL $0x249249, AX

// PACK stores the lanes of V set in M (8 bits, zero-extended) packed at
// DI and advances DI past them; M is clobbered.
#define PACK(V, M) \
	VPMOVZXBD (R13)(M*8), Y12; \
	VPERMD V, Y12, Y12; \
	VMOVDQU Y12, (DI); \
	POPCNTL M, M; \
	LEAQ (DI)(M*4), DI

// PACKROWS stores the rows of the step (Y0-Y2) set in t (AX) at DI.
#define PACKROWS \
	IMUL3L $7, AX, BX; \
	MOVBLZX BL, R10; \
	MOVL BX, R11; \
	SHRL $8, R11; \
	MOVBLZX R11B, R11; \
	SHRL $16, BX; \
	PACK(Y0, R10); \
	PACK(Y1, R11); \
	PACK(Y2, BX)

// PACKNUMS stores the numbers (Y13) of the rows set in t (AX) at DX and
// advances DX past them: t's bits 3i are gathered to bits i in three
// rounds (pairs, fours, the byte).
#define PACKNUMS \
	MOVL AX, R12; \
	MOVL AX, R10; \
	SHRL $2, R10; \
	ORL R10, R12; \
	ANDL $0xC30C3, R12; \
	MOVL R12, R10; \
	SHRL $4, R10; \
	ORL R10, R12; \
	ANDL $0xF00F, R12; \
	MOVL R12, R10; \
	SHRL $8, R10; \
	ORL R10, R12; \
	ANDL $0xFF, R12; \
	VPMOVZXBD (R13)(R12*8), Y12; \
	VPERMD Y13, Y12, Y12; \
	VMOVDQU Y12, (DX); \
	POPCNTL R12, R12; \
	LEAQ (DX)(R12*4), DX

// LOADSTEP loads the step's 8 rows at SI into Y0-Y2.
#define LOADSTEP \
	VMOVDQU 0(SI), Y0; \
	VMOVDQU 32(SI), Y1; \
	VMOVDQU 64(SI), Y2

// func copyRowsAVX2(dst, src []byte, runs *bitRuns, keyed bool) (done, n int)
TEXT ·copyRowsAVX2(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ runs+48(FP), R8
	LANES(R8)
	MOVBQZX keyed+56(FP), R8
	LEAQ keptLanes<>(SB), R13

copyLoop:
	CMPQ CX, $96
	JB   copyDone
	LOADSTEP
	TESTQ R8, R8
	JNZ  copyKeyed
	SUBPLAIN
	JMP  copyTested

copyKeyed:
	SUBKEYED

copyTested:
	MASK
	CMPL AX, $0x249249
	JEQ  copyAll
	TESTL AX, AX
	JZ   copyNext
	PACKROWS
	JMP  copyNext

copyAll:
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI

copyNext:
	ADDQ $96, SI
	SUBQ $96, CX
	JMP  copyLoop

copyDone:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+64(FP)
	SUBQ dst_base+0(FP), DI
	MOVQ DI, n+72(FP)
	RET

// func matchRowsAVX2(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchRowsAVX2(SB), NOSPLIT, $0-88
	MOVQ nums_base+0(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ runs+56(FP), R8
	LANES(R8)
	MOVBQZX keyed+64(FP), R8
	LEAQ keptLanes<>(SB), R13
	MOVL r+48(FP), R11
	VMOVD R11, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

matchLoop:
	CMPQ CX, $96
	JB   matchDone
	LOADSTEP
	TESTQ R8, R8
	JNZ  matchKeyed
	SUBPLAIN
	JMP  matchTested

matchKeyed:
	SUBKEYED

matchTested:
	MASK
	CMPL AX, $0x249249
	JEQ  matchAll
	TESTL AX, AX
	JZ   matchNext
	PACKNUMS
	JMP  matchNext

matchAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX

matchNext:
	ADDQ $96, SI
	SUBQ $96, CX
	VPADDD Y14, Y13, Y13
	JMP  matchLoop

matchDone:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+72(FP)
	SUBQ nums_base+0(FP), DX
	SHRQ $2, DX
	MOVQ DX, kept+80(FP)
	RET

// func matchCopyRowsAVX2(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchCopyRowsAVX2(SB), NOSPLIT, $0-112
	MOVQ nums_base+0(FP), DX
	MOVQ dst_base+24(FP), DI
	MOVQ src_base+48(FP), SI
	MOVQ src_len+56(FP), CX
	MOVQ runs+80(FP), R8
	LANES(R8)
	MOVBQZX keyed+88(FP), R8
	LEAQ keptLanes<>(SB), R13
	MOVL r+72(FP), R11
	VMOVD R11, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14

bothLoop:
	CMPQ CX, $96
	JB   bothDone
	LOADSTEP
	TESTQ R8, R8
	JNZ  bothKeyed
	SUBPLAIN
	JMP  bothTested

bothKeyed:
	SUBKEYED

bothTested:
	MASK
	CMPL AX, $0x249249
	JEQ  bothAll
	TESTL AX, AX
	JZ   bothNext
	PACKNUMS
	PACKROWS
	JMP  bothNext

bothAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI

bothNext:
	ADDQ $96, SI
	SUBQ $96, CX
	VPADDD Y14, Y13, Y13
	JMP  bothLoop

bothDone:
	VZEROUPPER
	MOVQ src_len+56(FP), AX
	SUBQ CX, AX
	MOVQ AX, done+96(FP)
	SUBQ nums_base+0(FP), DX
	SHRQ $2, DX
	MOVQ DX, kept+104(FP)
	RET

// The AVX-512 steps (AVX-512 F, VL, BW, and BMI2): the same 8 rows a
// step and the same runs (LANES), but the step's first 16 lanes are one
// ZMM vector and its last 8 a YMM one, and each lane's test is one
// unsigned compare into a mask register (VPCMPUD, predicate 2: d <= w).
// The two masks are joined into m (KUNPCKWD) and read once; t = m & m>>1
// & m>>2 as above (two SHRX/AND rounds: u = m & m>>1, then u & u>>1),
// the lanes kept 7t, the row mask t's bits 3i gathered by PEXT (fast
// wherever AVX-512 is). Each vector's kept lanes are packed by
// VPCOMPRESSD into a register (no table) and stored whole: a compress
// straight to memory is slow on some CPUs (AMD Zen 4); the YMM vector is
// stored after the lanes kept of the first 16 (BZHI/POPCNT of 7t's low
// 16 bits), so, as in AVX2, a store stays in the step's room. 16 lanes in
// ZMM measured faster here than three YMM vectors (two compares and
// compresses fewer, a mask shift and join fewer): ~20 % a row. Each
// kernel has a loop for bits and one for keys (no branch on keyed a
// step), counting CX down from len-96.
//
// Registers as the AVX2 steps', and: Z3 and Z6 the first 16 lanes' runs
// (Y3:Y4, Y6:Y7), R9 1 (the SHRX count), R11 16 (BZHI's), R13 0x249249
// (a row's first lane); K1-K7 masks.

// CONSTS512 sets Z3, Z6, R9, R11, R13.
#define CONSTS512 \
	VINSERTI64X4 $1, Y4, Z3, Z3; \
	VINSERTI64X4 $1, Y7, Z6, Z6; \
	MOVL $1, R9; \
	MOVL $16, R11; \
	MOVL $0x249249, R13

// TEST512: AX = m, the lanes' verdicts (lane 3i+j: row i's axis j).
#define TEST512 \
	VPCMPUD $2, Z6, Z9, K1; \
	VPCMPUD $2, Y8, Y11, K3; \
	KUNPCKWD K1, K3, K4; \
	KMOVD K4, AX

// ROWS512: AX = t, row i's verdict at bit 3i (only there); ZF when no
// row is kept.
#define ROWS512 \
	SHRXL R9, AX, BX; \
	ANDL BX, AX; \
	SHRXL R9, AX, BX; \
	ANDL BX, AX; \
	ANDL R13, AX

// PACKROWS512 stores the rows of the step (Z0, Y2) set in t (AX) at DI
// and advances DI past them.
#define PACKROWS512 \
	IMUL3L $7, AX, R12; \
	KMOVD R12, K5; \
	KSHIFTRD $16, K5, K7; \
	VPCOMPRESSD.Z Z0, K5, Z9; \
	VMOVDQU32 Z9, (DI); \
	BZHIL R11, R12, BX; \
	POPCNTL BX, BX; \
	VPCOMPRESSD.Z Y2, K7, Y11; \
	VMOVDQU Y11, (DI)(BX*4); \
	POPCNTL R12, R12; \
	LEAQ (DI)(R12*4), DI

// LOADSTEP512 loads the step's 8 rows at SI into Z0 (16 lanes) and Y2.
#define LOADSTEP512 \
	VMOVDQU32 0(SI), Z0; \
	VMOVDQU 64(SI), Y2

// SUBPLAIN512 is SUBPLAIN on Z0 and Y2, into Z9 and Y11.
#define SUBPLAIN512 \
	VPSUBD Z3, Z0, Z9; \
	VPSUBD Y5, Y2, Y11

// SUBKEYED512 is SUBKEYED on Z0 and Y2, into Z9 and Y11.
#define SUBKEYED512 \
	VPSRAD $31, Z0, Z9; \
	VPSRAD $31, Y2, Y11; \
	VPSRLD $1, Z9, Z9; \
	VPSRLD $1, Y11, Y11; \
	VPXORD Z0, Z9, Z9; \
	VPXOR Y2, Y11, Y11; \
	VPSUBD Z3, Z9, Z9; \
	VPSUBD Y5, Y11, Y11

// PACKNUMS512 stores the numbers (Y13) of the rows set in t (AX) at DX
// and advances DX past them.
#define PACKNUMS512 \
	PEXTL R13, AX, BX; \
	KMOVD BX, K1; \
	VPCOMPRESSD.Z Y13, K1, Y12; \
	VMOVDQU Y12, (DX); \
	POPCNTL BX, BX; \
	LEAQ (DX)(BX*4), DX

// func copyRowsAVX512(dst, src []byte, runs *bitRuns, keyed bool) (done, n int)
TEXT ·copyRowsAVX512(SB), NOSPLIT, $0-80
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ runs+48(FP), R8
	LANES(R8)
	MOVBQZX keyed+56(FP), R8
	CONSTS512
	SUBQ $96, CX
	JLT  copyRowsAVX512Done
	TESTQ R8, R8
	JNZ  copyRowsAVX512Keyed

copyRowsAVX512Plain:
	LOADSTEP512
	SUBPLAIN512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  copyRowsAVX512PlainAll
	ROWS512
	JZ   copyRowsAVX512PlainNext
	PACKROWS512
copyRowsAVX512PlainNext:
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  copyRowsAVX512Plain
	JMP  copyRowsAVX512Done

copyRowsAVX512PlainAll:
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI
	JMP  copyRowsAVX512PlainNext

copyRowsAVX512Keyed:
	LOADSTEP512
	SUBKEYED512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  copyRowsAVX512KeyedAll
	ROWS512
	JZ   copyRowsAVX512KeyedNext
	PACKROWS512
copyRowsAVX512KeyedNext:
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  copyRowsAVX512Keyed
	JMP  copyRowsAVX512Done

copyRowsAVX512KeyedAll:
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI
	JMP  copyRowsAVX512KeyedNext

copyRowsAVX512Done:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	SUBQ $96, AX
	MOVQ AX, done+64(FP)
	SUBQ dst_base+0(FP), DI
	MOVQ DI, n+72(FP)
	RET

// func matchRowsAVX512(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchRowsAVX512(SB), NOSPLIT, $0-88
	MOVQ nums_base+0(FP), DX
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	MOVQ runs+56(FP), R8
	LANES(R8)
	MOVBQZX keyed+64(FP), R8
	MOVL r+48(FP), R12
	VMOVD R12, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	CONSTS512
	SUBQ $96, CX
	JLT  matchRowsAVX512Done
	TESTQ R8, R8
	JNZ  matchRowsAVX512Keyed

matchRowsAVX512Plain:
	LOADSTEP512
	SUBPLAIN512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  matchRowsAVX512PlainAll
	ROWS512
	JZ   matchRowsAVX512PlainNext
	PACKNUMS512
matchRowsAVX512PlainNext:
	VPADDD Y14, Y13, Y13
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  matchRowsAVX512Plain
	JMP  matchRowsAVX512Done

matchRowsAVX512PlainAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX
	JMP  matchRowsAVX512PlainNext

matchRowsAVX512Keyed:
	LOADSTEP512
	SUBKEYED512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  matchRowsAVX512KeyedAll
	ROWS512
	JZ   matchRowsAVX512KeyedNext
	PACKNUMS512
matchRowsAVX512KeyedNext:
	VPADDD Y14, Y13, Y13
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  matchRowsAVX512Keyed
	JMP  matchRowsAVX512Done

matchRowsAVX512KeyedAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX
	JMP  matchRowsAVX512KeyedNext

matchRowsAVX512Done:
	VZEROUPPER
	MOVQ src_len+32(FP), AX
	SUBQ CX, AX
	SUBQ $96, AX
	MOVQ AX, done+72(FP)
	SUBQ nums_base+0(FP), DX
	SHRQ $2, DX
	MOVQ DX, kept+80(FP)
	RET

// func matchCopyRowsAVX512(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)
TEXT ·matchCopyRowsAVX512(SB), NOSPLIT, $0-112
	MOVQ nums_base+0(FP), DX
	MOVQ dst_base+24(FP), DI
	MOVQ src_base+48(FP), SI
	MOVQ src_len+56(FP), CX
	MOVQ runs+80(FP), R8
	LANES(R8)
	MOVBQZX keyed+88(FP), R8
	MOVL r+72(FP), R12
	VMOVD R12, X13
	VPBROADCASTD X13, Y13
	VPADDD iota<>(SB), Y13, Y13
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	CONSTS512
	SUBQ $96, CX
	JLT  matchCopyRowsAVX512Done
	TESTQ R8, R8
	JNZ  matchCopyRowsAVX512Keyed

matchCopyRowsAVX512Plain:
	LOADSTEP512
	SUBPLAIN512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  matchCopyRowsAVX512PlainAll
	ROWS512
	JZ   matchCopyRowsAVX512PlainNext
	PACKNUMS512
	PACKROWS512
matchCopyRowsAVX512PlainNext:
	VPADDD Y14, Y13, Y13
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  matchCopyRowsAVX512Plain
	JMP  matchCopyRowsAVX512Done

matchCopyRowsAVX512PlainAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI
	JMP  matchCopyRowsAVX512PlainNext

matchCopyRowsAVX512Keyed:
	LOADSTEP512
	SUBKEYED512
	TEST512
	CMPL AX, $0xFFFFFF
	JEQ  matchCopyRowsAVX512KeyedAll
	ROWS512
	JZ   matchCopyRowsAVX512KeyedNext
	PACKNUMS512
	PACKROWS512
matchCopyRowsAVX512KeyedNext:
	VPADDD Y14, Y13, Y13
	ADDQ $96, SI
	SUBQ $96, CX
	JGE  matchCopyRowsAVX512Keyed
	JMP  matchCopyRowsAVX512Done

matchCopyRowsAVX512KeyedAll:
	VMOVDQU Y13, (DX)
	ADDQ $32, DX
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU Y2, 64(DI)
	ADDQ $96, DI
	JMP  matchCopyRowsAVX512KeyedNext

matchCopyRowsAVX512Done:
	VZEROUPPER
	MOVQ src_len+56(FP), AX
	SUBQ CX, AX
	SUBQ $96, AX
	MOVQ AX, done+96(FP)
	SUBQ nums_base+0(FP), DX
	SHRQ $2, DX
	MOVQ DX, kept+104(FP)
	RET
