/* format/wbkit_contract.h compiled as C, as the kernel target compiles it. */
#include "wbkit_contract.h"

#define WBKIT_COUNT_ROW(...) +1
int wbkit_contract_rows_in_c(void);
int wbkit_contract_rows_in_c(void)
{
	return (0 WB_TUNABLE_ROWS(WBKIT_COUNT_ROW)) * 100 + (0 WB_ERROR_COUNTER_ROWS(WBKIT_COUNT_ROW));
}
