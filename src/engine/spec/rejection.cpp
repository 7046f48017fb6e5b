// Point-mass verification: the longest prefix where the target's samples equal the drafts.
#include "engine/spec/rejection.h"

namespace vela {

int32_t accept_point_mass(const int32_t* target, const int32_t* drafts, int32_t n_drafts) {
  int32_t a = 0;
  while (a < n_drafts && target[a] == drafts[a]) ++a;
  return a;
}

}  // namespace vela
