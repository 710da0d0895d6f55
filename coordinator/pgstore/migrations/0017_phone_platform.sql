-- The platform (android or ios) and OS version (the Android version, or an
-- iPhone's iOS version) of the phone an observation was read on, from its
-- agent's last report (docs/dataset.md). Every phone before iPhones was an
-- Android phone: the rows before this migration are android, their OS
-- version not known ('').

ALTER TABLE observations ADD COLUMN phone_platform text NOT NULL DEFAULT 'android';
ALTER TABLE observations ADD COLUMN phone_os_version text NOT NULL DEFAULT '';
