/* A plugin table from a future ABI: mjfast must refuse it by its version, reading nothing else. */
#include <mjfast/plugin_abi.h>

static mjfast_plugin_api future_api = {MJFAST_PLUGIN_ABI_VERSION + 1, sizeof(mjfast_plugin_api),
                                       "FutureAbi"};

__attribute__((visibility("default"))) const mjfast_plugin_api* mjfast_plugin_FutureAbi(void) {
  return &future_api;
}
