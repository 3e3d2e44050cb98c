/*
 * mixprec.h - umbrella header: include this one and get the whole public API.
 */
#ifndef MIXPREC_H
#define MIXPREC_H

#include "mixprec/common.h"
#include "mixprec/status.h"
#include "mixprec/dtype.h"
#include "mixprec/convert.h"
#include "mixprec/tensor.h"
#include "mixprec/policy.h"
#include "mixprec/policy_map.h"
#include "mixprec/loss_scale.h"
#include "mixprec/quant.h"

#endif /* MIXPREC_H */
