// validate --multi-node's flags and Slurm variables turned into a rank's place (cli/multi_node.cpp).
#include "cli/multi_node.hpp"

#include <gtest/gtest.h>

namespace {

using gpuenv::cli::multi_node_config;
using gpuenv::cli::MultiNodeOptions;

MultiNodeOptions enabled() {
  MultiNodeOptions o;
  o.enabled = true;
  return o;
}

TEST(MultiNodeConfig, ReadsSlurmsVariables) {
  const std::map<std::string, std::string> env = {{"SLURM_PROCID", "2"},       {"SLURM_NTASKS", "3"},
                                                   {"SLURM_JOB_NODELIST", "gpu[01-04]"},
                                                   {"SLURM_STEP_NODELIST", "gpu[01-02,04]"},
                                                   {"SLURM_JOB_ID", "812"},     {"SLURM_STEP_ID", "0"}};
  auto c = multi_node_config(enabled(), env, "gpu04.cluster");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->world, 3);
  EXPECT_EQ(c->hosts, (std::vector<std::string>{"gpu01", "gpu02", "gpu04"}));  // the step's nodes, not the job's
  EXPECT_EQ(c->token, "slurm-812.0");
  EXPECT_EQ(c->port, 29517);
  EXPECT_EQ(c->local_host, "gpu04.cluster");
  EXPECT_EQ(c->buffer_bytes, 256u << 20);
  EXPECT_EQ(c->rendezvous_timeout, std::chrono::milliseconds(120000));
}

TEST(MultiNodeConfig, RefusesMoreTasksThanNodesAndMissingVariables) {
  auto many = multi_node_config(enabled(), {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}, {"SLURM_JOB_NODELIST", "n[1-2]"}}, "n1");
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().message.find("one task per node"), std::string::npos);
  EXPECT_NE(many.error().hint.find("--ntasks-per-node=1"), std::string::npos);
  auto none = multi_node_config(enabled(), {}, "n1");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().id, "validate.multi_node");
  auto bad_list = multi_node_config(enabled(), {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "n[2-1]"}}, "n1");
  ASSERT_FALSE(bad_list);
  EXPECT_EQ(bad_list.error().id, "multinode.hostlist");
}

TEST(MultiNodeConfig, ReadsPeersRankAndPort) {
  MultiNodeOptions o = enabled();
  o.peers = "10.0.0.1:4000,10.0.0.2,node3";
  o.rank = 1;
  o.timeout = "30s";
  o.buffer = "64MiB";
  auto c = multi_node_config(o, {{"SLURM_PROCID", "5"}}, "");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->world, 3);
  EXPECT_EQ(c->port, 4000);
  EXPECT_EQ(c->hosts, (std::vector<std::string>{"10.0.0.1", "10.0.0.2", "node3"}));
  EXPECT_EQ(c->local_host, "10.0.0.2");
  EXPECT_EQ(c->token, "peers:10.0.0.1:4000,10.0.0.2,node3");
  EXPECT_EQ(c->buffer_bytes, 64u << 20);
  EXPECT_EQ(c->rendezvous_timeout, std::chrono::milliseconds(30000));
  o.port = 5000;
  EXPECT_EQ(multi_node_config(o, {}, "")->port, 5000);
}

TEST(MultiNodeConfig, RefusesBadFlags) {
  auto with = [](auto change) {
    MultiNodeOptions o = enabled();
    o.peers = "a,b";
    o.rank = 0;
    change(o);
    return multi_node_config(o, {}, "a");
  };
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.rank = 2; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.peers = "a,b:99"; }));  // only rank 0's entry has a port
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.peers = "a:0,b"; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.peers = "a,,b"; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.peers = "a,b\x1b[2J"; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.timeout = "soon"; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.buffer = "1MiB"; }));
  EXPECT_FALSE(with([](MultiNodeOptions& o) { o.port = 70000; }));
  MultiNodeOptions rank_only = enabled();
  rank_only.rank = 1;
  EXPECT_FALSE(multi_node_config(rank_only, {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_NODELIST", "a"}}, "a"));
}

}  // namespace
