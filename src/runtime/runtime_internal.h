/* Internal to the runtime layer. */
#ifndef LT_RUNTIME_INTERNAL_H
#define LT_RUNTIME_INTERNAL_H

#include "looptune/runtime.h"

#endif
