// runner/machine/device_factory.h: the one place a user's text (--device, the
// experiment's `device:`) becomes a DeviceKind. The words are exact (no case
// folding, no "gpu"), "auto" is a choice and not a kind, and what the factory
// makes says the kind it was asked for.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "runner/machine/device_factory.h"

namespace mpb {
namespace {

TEST(DeviceFactory, ParsesExactlyTheTwoKindWords) {
  EXPECT_EQ(parse_device_kind("cpu"), DeviceKind::Cpu);
  EXPECT_EQ(parse_device_kind("cuda"), DeviceKind::Cuda);
  for (const char* other : {"auto", "CPU", "Cuda", "gpu", "", " cpu", "cpu "})
    EXPECT_EQ(parse_device_kind(other), std::nullopt) << "'" << other << "'";
}

TEST(DeviceFactory, ParseAndNameRoundTrip) {
  for (DeviceKind k : {DeviceKind::Cpu, DeviceKind::Cuda}) EXPECT_EQ(parse_device_kind(device_kind_name(k)), k);
}

TEST(DeviceFactory, TheCpuDeviceSaysCpu) {
  EXPECT_EQ(make_device("cpu")->info().kind, DeviceKind::Cpu);
  EXPECT_EQ(make_device(DeviceKind::Cpu)->info().kind, DeviceKind::Cpu);
}

TEST(DeviceFactory, AutoFallsBackToTheCpuWithTheReason) {
  std::string notice;
  const std::unique_ptr<Device> dev = make_device("auto", &notice);
  if (dev->info().kind == DeviceKind::Cpu) {
    EXPECT_NE(notice.find("; using the CPU device"), std::string::npos) << notice;
  } else {
    EXPECT_EQ(dev->info().kind, DeviceKind::Cuda);
    EXPECT_EQ(notice, "") << "a usable GPU needs no notice";
  }
}

TEST(DeviceFactory, AnUnknownWordIsADeviceErrorNamingIt) {
  try {
    make_device("tpu");
    ADD_FAILURE() << "'tpu' made a device";
  } catch (const DeviceError& e) {
    EXPECT_EQ(std::string(e.what()), "unknown device 'tpu' (expected cpu, cuda or auto)");
  }
}

}  // namespace
}  // namespace mpb
