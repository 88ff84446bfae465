/* See cuda_runtime_api.h beside this file. */
#include "cuda_runtime_api.h"
